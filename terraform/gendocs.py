"""Write terraform/docs/{resources,data-sources}/<name>.md from the provider's own declarations (arguments,
attributes, update or replace, import, timeouts), so the pages cannot drift from the code.

    terraform/.venv/bin/python terraform/gendocs.py [--check]

`--check` exits 1 when a page differs from what would be written (the unit test runs it).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

from gpucloud_tf.datasources import DATA_SOURCES  # noqa: E402
from gpucloud_tf.resources import RESOURCES  # noqa: E402

DOCS = Path(__file__).resolve().parent / "docs"
KIND = {"required": "Required", "optional": "Optional", "optional_computed": "Optional (the API's value when unset)"}
TYPE = {"str": "string", "int": "number", "bool": "bool", "list": "list(string)", "set": "set(string)",
        "map": "map(string)"}
EXAMPLES = {
    "ssh_key": 'resource "gpucloud_ssh_key" "laptop" {\n  name       = "laptop"\n  public_key = file("~/.ssh/id_ed25519.pub")\n}',
    "vpc": 'resource "gpucloud_vpc" "main" {\n  name        = "main"\n  cidr        = "10.10.0.0/16"\n  description = "training"\n}',
    "subnet": 'resource "gpucloud_subnet" "nodes" {\n  vpc  = gpucloud_vpc.main.id\n  name = "nodes"\n  cidr = "10.10.1.0/24"\n}',
    "security_group": 'resource "gpucloud_security_group" "ssh" {\n  vpc  = gpucloud_vpc.main.id\n  name = "ssh"\n}',
    "security_group_rule": 'resource "gpucloud_security_group_rule" "ssh_in" {\n  security_group   = gpucloud_security_group.ssh.id\n  direction        = "ingress"\n  protocol         = "tcp"\n  port_range_min   = 22\n  port_range_max   = 22\n  remote_ip_prefix = "0.0.0.0/0"\n}',
    "public_ip": 'resource "gpucloud_public_ip" "web" {\n  vpc  = gpucloud_vpc.main.id\n  pool = "public"\n  port = gpucloud_instance.web.port_ids[0]\n}',
    "instance": 'resource "gpucloud_instance" "notebook" {\n  name               = "notebook"\n  flavor             = data.gpucloud_flavor.mig.id\n  image              = data.gpucloud_images.ubuntu.images[0].id\n  ssh_keys           = [gpucloud_ssh_key.laptop.id]\n  subnet_id          = gpucloud_subnet.nodes.id\n  security_group_ids = [gpucloud_security_group.ssh.id]\n}',
    "cluster": 'resource "gpucloud_cluster" "train" {\n  name            = "train"\n  flavor          = data.gpucloud_flavor.node.id\n  image           = data.gpucloud_images.ubuntu.images[0].id\n  size            = 2\n  subnet_id       = gpucloud_subnet.nodes.id\n  ib_partition_id = gpucloud_ib_partition.train.id\n\n  timeouts {\n    create = "45m"\n  }\n}',
    "ib_partition": 'resource "gpucloud_ib_partition" "train" {\n  fabric = "ib-compute"\n  name   = "train"\n}',
    "ib_partition_member": 'resource "gpucloud_ib_partition" "storage" {\n  fabric = "ib-compute"\n  name   = "storage"\n}\n\n# The cluster\'s first node (launched into gpucloud_ib_partition.train) also reaches the storage partition.\nresource "gpucloud_ib_partition_member" "train0_storage" {\n  partition_id = gpucloud_ib_partition.storage.id\n  guid         = gpucloud_cluster.train.ib_guids[0]\n  membership   = "limited"\n}',
    "lease": 'resource "gpucloud_lease" "next_week" {\n  name      = "private-cloud"\n  start     = "2030-01-07T00:00:00Z"\n  end       = "2030-01-14T00:00:00Z"\n  kind      = "hosts"\n  gpu_model = "H100-SXM5-80GB"\n  quantity  = 4\n}',
    "api_token": 'resource "gpucloud_api_token" "ci" {\n  name    = "ci"\n  scope   = "read"\n  project = var.project\n}',
    "webhook_endpoint": 'resource "gpucloud_webhook_endpoint" "ops" {\n  url    = "https://hooks.example.com/gpucloud"\n  events = ["lease.confirmed"]\n}',
    "volume": 'resource "gpucloud_volume" "data" {\n  name        = "data"\n  volume_type = var.volume_type\n  size_gib    = 100\n  description = "datasets"\n}',
    "volume_attachment": 'resource "gpucloud_volume_attachment" "data" {\n  volume_id   = gpucloud_volume.data.id\n  instance_id = gpucloud_instance.notebook.id\n}',
    "project": 'resource "gpucloud_project" "staging" {\n  organization = var.organization\n  slug         = "staging"\n  name         = "Staging"\n}',
}

DS_EXAMPLES = {
    "flavors": 'data "gpucloud_flavors" "h100" {\n  gpu_model = "H100-SXM5-80GB"\n}\n\noutput "h100_flavors" {\n  value = data.gpucloud_flavors.h100.flavors[*].name\n}',
    "flavor": 'data "gpucloud_flavor" "node" {\n  gpu_model = "H100-SXM5-80GB"\n  gpu_count = 8\n}\n\n# flavor = data.gpucloud_flavor.node.id in a gpucloud_instance or gpucloud_cluster',
    "images": 'data "gpucloud_images" "ubuntu" {\n  os = "ubuntu"\n}\n\n# image = data.gpucloud_images.ubuntu.images[0].id',
    "regions": 'data "gpucloud_regions" "all" {}\n\noutput "zones" {\n  value = flatten(data.gpucloud_regions.all.regions[*].zones)\n}',
    "quotas": 'data "gpucloud_quotas" "mine" {}\n\noutput "vcpu_left" {\n  value = [for q in data.gpucloud_quotas.mine.quotas : q.limit - q.usage if q.resource == "vcpus"]\n}',
    "prices": 'data "gpucloud_prices" "on_demand" {\n  pricing_model = "on_demand"\n}',
    "capacity": 'data "gpucloud_capacity" "next_week" {\n  start     = var.lease_start\n  end       = var.lease_end\n  step_s    = 86400\n  gpu_model = "H100-SXM5-80GB"\n}\n\n# Can 2 nodes of 8 GPUs be had now, and if not, why and when?\ndata "gpucloud_capacity" "two_nodes" {\n  flavor         = data.gpucloud_flavor.node.id\n  instance_count = 2\n  image          = data.gpucloud_images.ubuntu.images[0].id\n}\n\noutput "two_nodes" {\n  value = data.gpucloud_capacity.two_nodes.placeable ? "now" : "${data.gpucloud_capacity.two_nodes.code}: ${coalesce(data.gpucloud_capacity.two_nodes.earliest_start, \"no known time\")}"\n}',
}


def hcl_type(t) -> str:
    """A cty type (its JSON form: "string", ["list", "string"], ["object", {...}]) as Terraform writes it."""
    if isinstance(t, str):
        return t
    kind, inner = t[0], t[1]
    if kind == "object":
        return "object({" + ", ".join(f"{k} = {hcl_type(v)}" for k, v in inner.items()) + "})"
    return f"{kind}({hcl_type(inner)})"


def _ds_attribute(a, field_docs: dict[str, str] | None = None) -> list[str]:
    """One attribute; a list of objects gets one sub-bullet per field of its objects (with `field_docs`' text)."""
    t = json.loads(a.type.tf_type())
    if isinstance(t, list) and t[0] in ("list", "set") and isinstance(t[1], list) and t[1][0] == "object":
        docs = field_docs or {}
        lines = [f"- `{a.name}` ({t[0]} of objects)" + (f": {a.description} Each with:" if a.description
                                                         else ", each with:")]
        lines += [f"  - `{k}` ({hcl_type(v)})" + (f": {docs[k]}" if k in docs else "") for k, v in t[1][1].items()]
        return lines
    return [f"- `{a.name}` ({hcl_type(t)})" + (f": {a.description}" if a.description else "")]


def _dur(seconds: float) -> str:
    return f"{int(seconds // 60)}m" if seconds % 60 == 0 else f"{int(seconds)}s"


def resource_page(cls) -> str:
    args = [f for f in cls.fields if f.argument]
    attrs = [f for f in cls.fields if not f.argument]
    out = [f"# gpucloud_{cls.name}", "", cls.description, "",
           "API: " + (getattr(cls, "api_doc", None) or f"`POST/GET/DELETE /api/v1/{cls.collection}/`"
                      + (" and `PATCH` (with `If-Match`)" if any(f.update for f in args) else "")) + ".", "",
           "## Example", "", "```hcl", EXAMPLES.get(cls.name, ""), "```", "", "## Arguments", ""]
    for f in args:
        change = "updated in place" if f.update else "forces replacement"
        api = f" (API `{f.api_name}`)" if f.api_name != f.name else ""
        out.append(f"- `{f.name}` ({TYPE[f.type]}, {KIND[f.kind]}; {change}){api}: {f.description or '-'}"
                   + (" Sensitive." if f.sensitive else ""))
    out += ["", "## Attributes", "", f"- `id` (string): {getattr(cls, 'id_doc', None) or 'the object' + chr(39) + 's id (UUID)'}."]
    for f in attrs:
        out.append(f"- `{f.name}` ({TYPE[f.type]}): {f.description or '-'}" + (" Sensitive." if f.sensitive else ""))
    ops = list(cls.timeout_ops())
    imp = getattr(cls, "import_id", "<id>")
    out += ["", "## Timeouts", "", "A `timeouts { ... }` block; defaults: "
            + ", ".join(f"`{k}` {_dur(cls.defaults[k])}" for k in ops) + ".",
            "Long actions wait on the API's operation or the object's status with backoff; a failed operation "
            "reports its `error_code` and `error_detail`, and the object stays in state tainted (the next apply "
            "replaces it).", "", "## Import", "", "```sh", f"terraform import gpucloud_{cls.name}.NAME {imp}", "```",
            "", "or an `import { to = gpucloud_" + cls.name + ".NAME, id = \"" + imp + "\" }` block. Every argument is "
            "read back from the API, so the next plan is empty (a `timeouts` block in the configuration shows as "
            "an in-place change once: it is Terraform's setting, not the API's)."]
    if cls.equivalent:
        out += ["", "Values the API normalizes compare equal to the configured spelling (no change, the spelling "
                    "in state is kept): " + ", ".join(f"`{k}`" for k in cls.equivalent) + " (surrounding "
                    "whitespace, a CIDR's or an instant's spelling, any-address prefixes)."]
    secret = getattr(cls, "secret_field", None)
    if secret:
        out += ["", f"`{secret}` is answered by the create only: after an import it is null."]
    if cls.name in ("instance", "cluster"):
        out += ["", "`user_data` is not answered by the API, only its SHA-256 (`user_data_sha256`): after an import "
                    "it is null in state, and the configured `user_data` is compared by digest, so the same text "
                    "plans nothing and another text plans a replacement."]
    if cls.name == "ib_partition_member":
        out += ["", "## Adding again is safe", "",
                "The API's add takes no `Idempotency-Key` and needs none: the same GUID with the same membership "
                "again answers the existing member, so an apply killed mid-create and run again adopts it. A GUID "
                "the project does not own (another project's, or one not yet in any of the project's partitions "
                "on that fabric) is refused as \"Not found.\" on `guid`.", ""]
        return "\n".join(out)
    if cls.name == "volume_attachment":
        out += ["", "## Attaching again is safe", "",
                "The attach action takes no `Idempotency-Key`; an apply killed mid-attach and run again gets 409 "
                "`already_attached` from the API and adopts that attachment (a detach of one that is gone is done).",
                ""]
        return "\n".join(out)
    out += ["", "## Creates are idempotent", "",
            "The create sends `Idempotency-Key: tf-<sha256 of type, body and a nonce>`: an apply killed mid-create "
            "and run again with the same configuration adopts the object the first run created (see "
            "docs/adr/0900-terraform-provider.md).", ""]
    return "\n".join(out)


def data_source_page(cls) -> str:
    schema = cls.get_schema()
    out = [f"# data.gpucloud_{cls.name}", "", cls.description, "",
           "## Example", "", "```hcl", DS_EXAMPLES[cls.name], "```", "", "## Arguments", ""]
    args = [a for a in schema.attributes if a.required or a.optional]
    for a in args:
        out.append(f"- `{a.name}` ({hcl_type(json.loads(a.type.tf_type()))}, "
                   f"{'Required' if a.required else 'Optional'}): {a.description or 'filter.'}")
    if not args:
        out.append("None.")
    out += ["", "## Attributes", ""]
    for a in schema.attributes:
        if a.computed:
            out += _ds_attribute(a, cls.field_docs.get(a.name))
    out += [""]
    return "\n".join(out)


def index_page() -> str:
    out = ["# terraform-provider-gpucloud", "",
           "The Terraform provider for gpucloud tenants: `source = \"gpucloud.local/gpucloud/gpucloud\"`, built by "
           "`make terraform-provider` (README, \"Terraform\"). It talks only to the public API (`/api/v1/`).", "",
           "## Provider configuration", "",
           "- `endpoint` (env `GPUCLOUD_ENDPOINT`): base URL of the API, e.g. `https://cloud.example`.",
           "- `token` (env `GPUCLOUD_TOKEN`, sensitive): an API token; a project-bound write token for project "
           "resources, an organization-bound one for `gpucloud_project` and `gpucloud_webhook_endpoint`.",
           "- `project` (env `GPUCLOUD_PROJECT`): the default project of resources that take one "
           "(`gpucloud_api_token` included): its id, slug or name, as `GET /api/v1/projects/` lists them.", "",
           "Configuring checks the token (`GET /api/v1/me/`): a refused token is `the API token was refused (HTTP "
           "401 ...)`, an endpoint that does not answer is `gpucloud API unreachable at <endpoint>`, one that "
           "answers something else (HTML, a 404 on `/api/v1/me/`) is `<endpoint> does not look like a gpucloud "
           "API: check endpoint`.", "",
           "Ctrl-C during an apply stops the provider's waits (Terraform's StopProvider): objects being created "
           "are recorded in state, tainted, so the next apply replaces them and `terraform destroy` deletes them. "
           "A plugin whose Terraform was killed (SIGKILL) exits within seconds.", "",
           "Mistakes are reported before anything is written, on the attribute: static ones (a CIDR with host bits, "
           "a size or quantity below 1, a lease instant that is not RFC 3339) at validate time; at plan time, for "
           "creates and updates alike, a lease window moved into the past, and for a new instance, cluster or lease "
           "the API's launch check (`POST /api/v1/<collection>/check/`: placement, quota, references). That check "
           "runs only when every argument it would send is known: one that refers to an object the same apply "
           "creates is checked by the create itself. `terraform destroy` (and `plan -destroy`) runs no create "
           "check: a configuration that can no longer be created does not block destroying what exists.", "",
           "## Example estate", "", "`terraform/examples/estate/main.tf`: networks, an SSH key, two InfiniBand "
           "partitions (the cluster's first node joins the second as a limited member), a MIG notebook VM with a public IP, a 2-node 8-GPU cluster, a lease, a CI token, a "
           "webhook and a second project; quotas and the capacity calendar over the lease window (data sources). Its variables `ssh_public_key`, "
           "`org_token`, `lease_start` and `lease_end` (RFC 3339, in the future) have no default.", "",
           "It needs 16 GPUs, 424 vCPUs and 3,735,552 MiB of memory of quota (the cluster of two `h100-8x` and "
           "the MIG notebook), more than an organization on the `default` plan has (8 GPUs, 256 vCPUs): provider "
           "staff raise the organization's limits with `PATCH /api/v1/quotas/<id>/ {\"limit\": N}` (a staff "
           "token; README, \"Terraform\", has the commands for the demo organization).", "", "## Resources", ""]
    out += [f"- [gpucloud_{c.name}](resources/{c.name}.md): {c.description}" for c in RESOURCES]
    out += ["", "## Data sources", ""]
    out += [f"- [gpucloud_{c.name}](data-sources/{c.name}.md): {c.description}" for c in DATA_SOURCES]
    return "\n".join(out) + "\n"


def pages() -> dict[Path, str]:
    out = {DOCS / "README.md": index_page()}
    out.update({DOCS / "resources" / f"{c.name}.md": resource_page(c) for c in RESOURCES})
    out.update({DOCS / "data-sources" / f"{c.name}.md": data_source_page(c) for c in DATA_SOURCES})
    return out


def main() -> int:
    check = "--check" in sys.argv
    stale = []
    for path, text in pages().items():
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print("stale provider docs (run terraform/.venv/bin/python terraform/gendocs.py):\n" + "\n".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
