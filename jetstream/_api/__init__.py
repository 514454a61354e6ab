"""The JetStream API through one core object, :class:`~jetstream._api.client.ApiClient` (a
session plus JSON requests retried across leader elections and the server's capabilities):
stream and consumer administration, direct gets, stream subjects, and the check that tells a
missing stream from an election. Every module here takes the ``ApiClient``; the
:class:`~jetstream.JetStream` facade is one."""
