"""Client-side encryption: the Keyring, the AES-GCM envelope, and values kept out of reprs."""
