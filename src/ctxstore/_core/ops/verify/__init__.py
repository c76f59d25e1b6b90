"""Checking a chat's invariants against its records, and repairing what they determine."""
