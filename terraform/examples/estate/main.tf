# An example tenant estate: networks, an SSH key, InfiniBand partitions, a MIG notebook VM with a public IP,
# a 2-node 8-GPU training cluster, a lease, a CI token and a webhook. Credentials come from the environment
# (GPUCLOUD_ENDPOINT, GPUCLOUD_TOKEN = a project token, GPUCLOUD_PROJECT); `org_token` (an organization token) is
# only needed for the organization-level resources (project, webhook).
terraform {
  required_providers {
    gpucloud = {
      source  = "gpucloud.local/gpucloud/gpucloud"
      version = "0.1.0"
    }
  }
}

variable "ssh_public_key" { type = string }
variable "org_token" {
  type      = string
  sensitive = true
}
variable "lease_start" { type = string } # RFC 3339, in the future
variable "lease_end" { type = string }
variable "gpu_model" {
  type    = string
  default = "H100-SXM5-80GB"
}
variable "cluster_size" {
  type    = number
  default = 2
}
variable "ssh_port" {
  type    = number
  default = 22
}
variable "vpc_description" {
  type    = string
  default = "training networks"
}

locals {
  # cloud-init for every VM; the API keeps only its SHA-256 visible, which is what an import compares
  cloud_init = "#cloud-config\npackage_update: true\npackages: [nvtop]\n"
}

provider "gpucloud" {}

provider "gpucloud" {
  alias = "org"
  token = var.org_token
}

data "gpucloud_flavor" "node" {
  gpu_model = var.gpu_model
  gpu_count = 8
  gpu_form  = "gpu"
}

data "gpucloud_flavor" "notebook" {
  gpu_model   = var.gpu_model
  mig_profile = "3g.40gb"
}

data "gpucloud_images" "ubuntu" {
  name = "ubuntu-24-04"
}

data "gpucloud_quotas" "mine" {}

data "gpucloud_capacity" "lease_window" {
  start     = var.lease_start
  end       = var.lease_end
  step_s    = 86400
  gpu_model = var.gpu_model
  zone      = "eu-west-a"
}

resource "gpucloud_ssh_key" "laptop" {
  name       = "laptop"
  public_key = var.ssh_public_key
}

resource "gpucloud_vpc" "main" {
  name        = "main"
  cidr        = "10.10.0.0/16"
  description = var.vpc_description
}

resource "gpucloud_subnet" "nodes" {
  vpc  = gpucloud_vpc.main.id
  name = "nodes"
  cidr = "10.10.1.0/24"
}

resource "gpucloud_security_group" "ssh" {
  vpc         = gpucloud_vpc.main.id
  name        = "ssh"
  description = "SSH from anywhere"
}

resource "gpucloud_security_group_rule" "ssh_in" {
  security_group   = gpucloud_security_group.ssh.id
  direction        = "ingress"
  protocol         = "tcp"
  port_range_min   = var.ssh_port
  port_range_max   = var.ssh_port
  remote_ip_prefix = "0.0.0.0/0"
}

resource "gpucloud_ib_partition" "train" {
  fabric = "ib-compute"
  name   = "train"
}

resource "gpucloud_instance" "notebook" {
  name               = "notebook"
  flavor             = data.gpucloud_flavor.notebook.id
  image              = data.gpucloud_images.ubuntu.images[0].id
  ssh_keys           = [gpucloud_ssh_key.laptop.id]
  subnet_id          = gpucloud_subnet.nodes.id
  security_group_ids = [gpucloud_security_group.ssh.id]
  user_data          = local.cloud_init
}

resource "gpucloud_public_ip" "notebook" {
  vpc  = gpucloud_vpc.main.id
  pool = "public"
  port = gpucloud_instance.notebook.port_ids[0]
}

resource "gpucloud_cluster" "train" {
  name               = "train"
  flavor             = data.gpucloud_flavor.node.id
  image              = data.gpucloud_images.ubuntu.images[0].id
  size               = var.cluster_size
  ssh_keys           = [gpucloud_ssh_key.laptop.id]
  subnet_id          = gpucloud_subnet.nodes.id
  security_group_ids = [gpucloud_security_group.ssh.id]
  ib_partition_id    = gpucloud_ib_partition.train.id
  user_data          = local.cloud_init
}

# The storage partition: the cluster's first node joins it too, as a limited member (it reaches the storage
# gateways, which are full members, and not the other limited members).
resource "gpucloud_ib_partition" "storage" {
  fabric = "ib-compute"
  name   = "storage"
}

resource "gpucloud_ib_partition_member" "train0_storage" {
  partition_id = gpucloud_ib_partition.storage.id
  guid         = gpucloud_cluster.train.ib_guids[0]
  membership   = "limited"
}

resource "gpucloud_lease" "next_week" {
  name      = "private-cloud"
  start     = var.lease_start
  end       = var.lease_end
  kind      = "hosts"
  gpu_model = var.gpu_model
  quantity  = 2
  zone      = "eu-west-a"
}

resource "gpucloud_api_token" "ci" {
  name    = "ci"
  scope   = "read"
  project = gpucloud_vpc.main.project
}

resource "gpucloud_project" "staging" {
  provider     = gpucloud.org
  organization = gpucloud_webhook_endpoint.ops.organization
  slug         = "staging"
  name         = "Staging"
}

resource "gpucloud_webhook_endpoint" "ops" {
  provider = gpucloud.org
  url      = "https://hooks.example.com/gpucloud"
  events   = ["lease.confirmed", "lease.ending_soon"]
}

output "notebook_address" { value = gpucloud_public_ip.notebook.address }
output "cluster_members" { value = gpucloud_cluster.train.members }
output "quotas" { value = { for q in data.gpucloud_quotas.mine.quotas : "${q.scope}/${q.resource}" => q.limit } }
# Free GPUs change as leases are made (the lease below included): an output of them would change every plan.
output "capacity_days" { value = length(data.gpucloud_capacity.lease_window.buckets) }
output "ci_token" {
  value     = gpucloud_api_token.ci.token
  sensitive = true
}
