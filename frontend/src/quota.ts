// Quota keys in a person's words: the API's resource keys (`gpus:H100-SXM5-80GB`, `memory_mib`, ...; the list is
// apps/tenancy/quotas.py RESOURCES) as labels, and their amounts with units (memory in GiB, storage in GiB).

const LABELS: Record<string, string> = {
  projects: 'Projects', gpus: 'GPUs', mig_slices: 'MIG slices', vgpus: 'vGPUs', vcpus: 'vCPUs', memory_mib: 'Memory',
  instances: 'Instances', vpcs: 'VPCs', public_ips: 'Public IPs', ib_partitions: 'InfiniBand partitions',
  leases: 'Leases', volumes: 'Volumes', volume_gib: 'Volume storage', snapshots: 'Snapshots',
}

/** The resource keys a quota may name, in the API's order, and those that take a qualifier after ":" (a GPU model,
 * a MIG profile, a vGPU type, a volume type). */
export const QUOTA_RESOURCES = Object.keys(LABELS)
export const QUALIFIABLE = new Set(['gpus', 'mig_slices', 'vgpus', 'volume_gib'])

/** `gpus:H100-SXM5-80GB` → "H100-SXM5-80GB GPUs", `memory_mib` → "Memory", `volume_gib:ssd` → "Volume storage
 * (ssd)"; an unknown key is shown as it is. */
export function quotaLabel(resource: string): string {
  const [base, qualifier] = resource.split(/:(.*)/s)
  const label = LABELS[base]
  if (!label) return resource
  if (!qualifier) return label
  return base === 'gpus' || base === 'vgpus' ? `${qualifier} ${label}` : `${label} (${qualifier})`
}

/** An amount of `resource` with its unit: memory (MiB in the API) in GiB, storage in GiB, counts as they are. */
export function quotaAmount(resource: string, n: number): string {
  const base = resource.split(':')[0]
  if (base === 'memory_mib') {
    const gib = n / 1024
    return `${Number.isInteger(gib) ? gib : gib.toFixed(1)} GiB`
  }
  if (base === 'volume_gib') return `${n} GiB`
  return String(n)
}

/** "this project" / "organization": where a quota line's limit is set. */
export function quotaScope(scope: string): string {
  return scope === 'project' ? 'this project' : scope === 'organization' ? 'organization' : scope
}

/** How many of `count` identical creates the quota `lines` of one create's check let through, and the line that
 * stops the rest (null: all fit, or the check already refuses the first). Each create adds its line's `requested`
 * to `used`; a launch of several instances is made one by one, so the first ones take the room. */
export function quotaFits(lines: { resource: string; scope: string; limit: number; used: number; requested: number; exceeded: boolean }[],
  count: number): { fits: number; line: (typeof lines)[number] } | null {
  let worst: { fits: number; line: (typeof lines)[number] } | null = null
  for (const line of lines) {
    if (line.exceeded || line.requested <= 0) continue
    const fits = Math.max(0, Math.floor((line.limit - line.used) / line.requested))
    if (fits < count && (!worst || fits < worst.fits)) worst = { fits, line }
  }
  return worst
}
