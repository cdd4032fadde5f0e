"""Compute writes. Import services from their modules (`catalog`, `ssh_keys`, `instances`, `clusters`)."""
