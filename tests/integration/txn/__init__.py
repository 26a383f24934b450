"""Integration tests of the transaction-coordinator client and the clients a process keeps."""
