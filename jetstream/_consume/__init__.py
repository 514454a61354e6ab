"""Consuming streams (ADR-37): pull consumers and their engine, pull windows and options,
ordered consumers and their resets, keep-alive, priority groups and one-shot scans."""
