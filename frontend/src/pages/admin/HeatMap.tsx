import { Badge, Group, Stack, Text, Title, UnstyledButton, VisuallyHidden } from '@mantine/core'
import type { FleetGpu, FleetHost, FleetSummary } from '../../api/client'

/** The heat-map state of a GPU (the server's `state`), its colour and its legend text. Dark fills, so the white
 * host text beside them and the cells' outline stay readable; each state also differs in its pattern letter. */
export const GPU_STATES: { state: FleetGpu['state']; label: string; color: string; mark: string }[] = [
  { state: 'free', label: 'Free', color: '#2b8a3e', mark: '' },
  { state: 'allocated', label: 'Allocated', color: '#1864ab', mark: '' },
  { state: 'dirty', label: 'Dirty (scrub queued)', color: '#b35c00', mark: '•' },
  { state: 'scrub_failed', label: 'Scrub failed', color: '#862e9c', mark: '!' },
  { state: 'faulty', label: 'Faulty', color: '#c92a2a', mark: '×' },
]
const BY_STATE = Object.fromEntries(GPU_STATES.map((s) => [s.state, s]))

export const CONDITION_COLORS: Record<string, string> = {
  available: 'teal.9', cordoned: 'yellow.9', draining: 'orange.9', maintenance: 'grape.8', faulty: 'red.9',
  enrolling: 'blue.8', retired: 'gray.7',
}

export interface HeatMapFilters {
  gpuModel: string | null
  condition: string | null
}

export interface RackRows {
  key: string
  region: string
  zone: string
  rack: string
  hosts: FleetHost[]
}

/** The racks of `summary` (region, zone, rack, in the server's order) with only the hosts the filters keep. */
export function filterRacks(summary: FleetSummary, filters: HeatMapFilters): RackRows[] {
  const out: RackRows[] = []
  for (const region of summary.regions)
    for (const zone of region.zones)
      for (const rack of zone.racks) {
        const hosts = rack.hosts.filter(
          (h) =>
            (!filters.condition || h.condition === filters.condition) &&
            (!filters.gpuModel || (h.gpu_model ?? '').split('/').includes(filters.gpuModel)),
        )
        if (hosts.length)
          out.push({ key: `${zone.name}/${rack.name ?? ''}`, region: region.name, zone: zone.name, rack: rack.name ?? 'no rack', hosts })
      }
  return out
}

/** "8 GPUs: 3 allocated, 5 free" — what a host row says to a screen reader (its cells are drawn only). */
export function hostSummary(host: FleetHost): string {
  const counts = new Map<string, number>()
  for (const g of host.gpus) counts.set(g.state, (counts.get(g.state) ?? 0) + 1)
  const parts = GPU_STATES.filter((s) => counts.has(s.state)).map((s) => `${counts.get(s.state)} ${s.label.toLowerCase()}`)
  return `${host.gpus.length} GPU${host.gpus.length === 1 ? '' : 's'}${parts.length ? ': ' + parts.join(', ') : ''}`
}

export function Legend() {
  return (
    <Group gap="md" data-testid="heatmap-legend" aria-label="Legend" role="list">
      {GPU_STATES.map((s) => (
        <Group key={s.state} gap={6} role="listitem">
          <GpuCell color={s.color} mark={s.mark} />
          <Text size="sm">{s.label}</Text>
        </Group>
      ))}
    </Group>
  )
}

function GpuCell({ color, mark, title }: { color: string; mark: string; title?: string }) {
  return (
    <span
      aria-hidden
      title={title}
      style={{
        display: 'inline-flex', alignItems: 'center', justifyContent: 'center', width: 16, height: 16,
        background: color, borderRadius: 3, color: '#fff', fontSize: 11, lineHeight: 1, fontWeight: 700,
      }}
    >
      {mark}
    </span>
  )
}

/** Host rows grouped by rack; each GPU a cell coloured by its state (MIG GPUs carry their layout in the tooltip).
 * A host row is a button: choosing it opens its detail (`onSelect`). */
export function HeatMap({ summary, filters, selected, onSelect }: {
  summary: FleetSummary
  filters: HeatMapFilters
  selected?: string | null
  onSelect: (host: FleetHost) => void
}) {
  const racks = filterRacks(summary, filters)
  if (!racks.length)
    return (
      <Text c="dimmed" data-testid="heatmap-empty">
        No host matches these filters.
      </Text>
    )
  return (
    <Stack gap="md" data-testid="heatmap">
      {racks.map((rack) => (
        <section key={rack.key} aria-label={`Rack ${rack.rack} in ${rack.zone}`} data-testid="heatmap-rack">
          <Title order={3} size="h5" mb={4}>
            {rack.zone} / {rack.rack}{' '}
            <Text span size="sm" c="dimmed">
              ({rack.region}, {rack.hosts.length} host{rack.hosts.length === 1 ? '' : 's'})
            </Text>
          </Title>
          <Stack gap={2}>
            {rack.hosts.map((host) => (
              <UnstyledButton
                key={host.id}
                onClick={() => onSelect(host)}
                aria-pressed={selected === host.id}
                data-testid="heatmap-host"
                data-host={host.name}
                data-condition={host.condition}
                px={6}
                py={2}
                style={{
                  borderRadius: 4,
                  outline: selected === host.id ? '2px solid var(--mantine-color-blue-8)' : undefined,
                }}
              >
                <Group gap="xs" wrap="nowrap">
                  <Text size="sm" ff="monospace" w={120} truncate>
                    {host.name}
                  </Text>
                  <Badge size="sm" w={100} color={CONDITION_COLORS[host.condition] ?? 'gray.7'} variant="filled" autoContrast>
                    {host.condition}
                  </Badge>
                  <Group gap={3} wrap="nowrap">
                    {host.gpus.map((g) => (
                      <GpuCell
                        key={g.index}
                        color={BY_STATE[g.state]?.color ?? '#495057'}
                        mark={BY_STATE[g.state]?.mark ?? ''}
                        title={`GPU ${g.index}: ${BY_STATE[g.state]?.label ?? g.state}${g.mig ? ` (MIG ${g.mig})` : ''}`}
                      />
                    ))}
                  </Group>
                  {/* the cells are drawn only: their count per state is said in words (the row's name is its
                      visible text and this, as WCAG's label-in-name asks) */}
                  <VisuallyHidden>{hostSummary(host)}</VisuallyHidden>
                  {host.mig && (
                    <Text size="xs" c="dimmed" truncate>
                      MIG {host.mig}
                    </Text>
                  )}
                </Group>
              </UnstyledButton>
            ))}
          </Stack>
        </section>
      ))}
    </Stack>
  )
}
