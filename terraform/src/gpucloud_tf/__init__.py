"""terraform-provider-gpucloud: a Terraform provider for gpucloud tenants (public REST API only)."""
__version__ = "0.1.0"
