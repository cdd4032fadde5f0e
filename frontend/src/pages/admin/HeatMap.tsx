import { Group, Stack, Text, Title } from '@mantine/core'
import { memo } from 'react'
import type { FleetGpu, FleetHost, FleetSummary } from '../../api/client'
import './HeatMap.css'

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
  /** hosts with at least one GPU in this heat-map state (e.g. faulty) */
  gpuState?: string | null
  /** only the hosts in the provider's spare pool */
  spareOnly?: boolean
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
            (!filters.spareOnly || h.spare) &&
            (!filters.gpuState || h.gpus.some((g) => g.state === filters.gpuState)) &&
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
    <span aria-hidden className="hm-cell" title={title} style={{ background: color }}>
      {mark}
    </span>
  )
}

/** A Mantine colour name (`teal.9`) as its CSS variable. */
const cssColor = (c: string) => `var(--mantine-color-${c.replace('.', '-')})`
/** Condition fills too light for white text (under 4.5:1): those take black. */
const DARK_TEXT = new Set(['yellow.9', 'orange.9'])

/** One host row: plain elements (a fleet has thousands of rows of 8 cells; each Mantine component per cell would
 * cost the first render seconds), redrawn only when its host or its selection changes. */
const HostRow = memo(function HostRow({ host, selected, onSelect }: {
  host: FleetHost
  selected: boolean
  onSelect: (host: FleetHost) => void
}) {
  const fill = CONDITION_COLORS[host.condition] ?? 'gray.7'
  return (
    <button type="button" className="hm-host" onClick={() => onSelect(host)} aria-pressed={selected}
      data-testid="heatmap-host" data-host={host.name} data-condition={host.condition}>
      <span className="hm-name">{host.name}</span>
      <span className="hm-condition" style={{ background: cssColor(fill), color: DARK_TEXT.has(fill) ? '#000' : '#fff' }}>
        {host.condition}
      </span>
      <span className="hm-cells">
        {host.gpus.map((g) => (
          <GpuCell
            key={g.index}
            color={BY_STATE[g.state]?.color ?? '#495057'}
            mark={BY_STATE[g.state]?.mark ?? ''}
            title={`GPU ${g.index}: ${BY_STATE[g.state]?.label ?? g.state}${g.mig ? ` (MIG ${g.mig})` : ''}`}
          />
        ))}
      </span>
      {/* after the cells, so every row's cells line up */}
      {host.spare && <span className="hm-spare" data-testid="heatmap-spare">spare</span>}
      {/* the cells are drawn only: their count per state is said in words (the row's name is its visible text
          and this, as WCAG's label-in-name asks) */}
      <span className="visually-hidden">{hostSummary(host)}</span>
      {host.mig && <span className="hm-mig">MIG {host.mig}</span>}
    </button>
  )
})

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
        <section key={rack.key} aria-label={`Rack ${rack.rack} in ${rack.zone}`} data-testid="heatmap-rack" className="hm-rack"
          style={{ containIntrinsicSize: `auto ${40 + 24 * rack.hosts.length}px` }}>
          <Title order={3} size="h5" mb={4}>
            {rack.zone} / {rack.rack}{' '}
            <Text span size="sm" c="dimmed">
              ({rack.region}, {rack.hosts.length} host{rack.hosts.length === 1 ? '' : 's'})
            </Text>
          </Title>
          <div className="hm-rows">
            {rack.hosts.map((host) => (
              <HostRow key={host.id} host={host} selected={selected === host.id} onSelect={onSelect} />
            ))}
          </div>
        </section>
      ))}
    </Stack>
  )
}
