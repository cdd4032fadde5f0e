import { Anchor, Badge, Button, Checkbox, Grid, Group, Modal, Paper, Select, SimpleGrid, Stack, Table, Text, Textarea, Title } from '@mantine/core'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useCallback, useEffect, useRef, useState } from 'react'
import { Link } from 'react-router'
import { ApiError, api, unwrap, type FleetHost, type Gpu, type Host, type Schemas } from '../../api/client'
import { useMe } from '../../auth/staff'
import { ProblemAlert, fieldError } from '../../components/ProblemAlert'
import { useSubmitOnce } from '../../hooks/useSubmitOnce'
import { NotFoundPage } from '../NotFound'
import { fleetKey, fleetQuery } from './queries'
import { CONDITION_COLORS, GPU_STATES, HeatMap, Legend, type HeatMapFilters } from './HeatMap'

const CONDITIONS = ['available', 'cordoned', 'draining', 'maintenance', 'faulty', 'enrolling']

/** The host actions of the API (`POST /hosts/{id}/<action>/`), as the console names them. */
export const HOST_ACTIONS: Record<string, { label: string; color?: string; hint: string }> = {
  cordon: { label: 'Cordon', hint: 'No new placements land on it; what runs there keeps running.' },
  drain: {
    label: 'Drain', color: '#a33a00',
    hint: 'No new placements land on it. Draining does not stop or move what runs there: a VM on a failed GPU or host '
      + 'moves when health opens a remediation for it, under its project\'s consent mode (see "Moves off this host"); '
      + 'everything else keeps running until its tenant stops or deletes it.',
  },
  maintenance: { label: 'Maintenance', color: 'grape.8', hint: 'Take it out of service for work on it.' },
  'mark-faulty': { label: 'Mark faulty', color: 'red.9', hint: 'Opens an incident (SLA downtime when the provider is at fault).' },
  'mark-available': { label: 'Mark available', color: 'teal.9', hint: 'Back in service (closes an open incident).' },
  retire: { label: 'Retire', color: 'red.9', hint: 'Leaves the fleet for good; this cannot be undone.' },
}

type ActionPath = '/api/v1/hosts/{id}/cordon/' | '/api/v1/hosts/{id}/drain/' | '/api/v1/hosts/{id}/maintenance/'
  | '/api/v1/hosts/{id}/mark-faulty/' | '/api/v1/hosts/{id}/mark-available/' | '/api/v1/hosts/{id}/retire/'


function ago(iso: string | null | undefined): string {
  if (!iso) return 'never'
  const s = Math.max(0, Math.round((Date.now() - new Date(iso).getTime()) / 1000))
  if (s < 90) return `${s} s ago`
  if (s < 5400) return `${Math.round(s / 60)} min ago`
  return new Date(iso).toISOString().replace('T', ' ').slice(0, 16) + ' UTC'
}

type Workloads = Schemas['HostWorkloadsOutput']

const GPU_FAULTY_HINT = 'Out of placement at once and an incident opened for this GPU alone; the host\'s other GPUs '
  + 'keep working. What runs on it keeps running until moved.'
const GPU_HEALTHY_HINT = 'Back in placement: closes its incident (the downtime ends now).'
const OPEN_MOVES = new Set(['notice', 'proposed', 'approved', 'running'])

/** A button that asks for a reason in a confirmation dialog, then runs `action(reason)`. */
function ReasonButton({ label, title, hint, color, note, action, onDone, ariaLabel, size = 'xs' }: {
  label: string; title: string; hint: string; color?: string; note?: React.ReactNode; ariaLabel?: string; size?: string
  action: (reason: string) => Promise<unknown>; onDone: (result: unknown) => void
}) {
  const [opened, setOpened] = useState(false)
  const [reason, setReason] = useState('')
  const run = useMutation({
    mutationFn: () => action(reason),
    onSuccess: (result) => {
      onDone(result)
      setOpened(false)
      setReason('')
    },
    // a 409 says the object moved on (another operator, the agent): read it again, so the panel shows what is
    onError: (error) => {
      if (error instanceof ApiError && error.status === 409) onDone(undefined)
    },
  })
  const submit = useSubmitOnce(run)
  return (
    <>
      <Button size={size} variant="filled" color={color ?? 'blue.8'} onClick={() => setOpened(true)} aria-label={ariaLabel}>
        {label}
      </Button>
      <Modal opened={opened} onClose={() => setOpened(false)} title={title} centered
        closeButtonProps={{ 'aria-label': 'Close' }}>
        <form onSubmit={(e) => { e.preventDefault(); submit(undefined) }}>
          <Stack>
            <Text size="sm">{hint}</Text>
            {note}
            <Textarea label="Reason" description="Recorded on the host and in the audit log." required
              minRows={2} maxLength={500} value={reason} onChange={(e) => setReason(e.currentTarget.value)}
              error={fieldError(run.error, 'reason')} data-autofocus />
            <ProblemAlert error={run.error} shownFields={['reason']} />
            <Group justify="flex-end">
              <Button variant="default" onClick={() => setOpened(false)}>Cancel</Button>
              <Button type="submit" color={color ?? 'blue.8'} loading={run.isPending} disabled={!reason.trim()}>
                {label}
              </Button>
            </Group>
          </Stack>
        </form>
      </Modal>
    </>
  )
}

/** One GPU's condition from the host panel: Mark faulty (its own incident; the host and its other GPUs stay in
 * service) or, on a faulty GPU, Mark healthy (`POST /gpus/{id}/mark-faulty|mark-healthy/`, with a reason). */
function GpuHealthButton({ gpu, host, onDone }: { gpu: Gpu; host: string; onDone: () => void }) {
  const faulty = gpu.health === 'faulty'
  const verb = faulty ? 'healthy' : 'faulty'
  return (
    <ReasonButton label={`Mark ${verb}`} ariaLabel={`Mark ${verb}: GPU ${gpu.index}`} size="compact-xs"
      title={`Mark GPU ${gpu.index} of ${host} ${verb}?`} color={faulty ? 'teal.9' : 'red.9'}
      hint={faulty ? GPU_HEALTHY_HINT : GPU_FAULTY_HINT} onDone={onDone}
      action={(reason) => unwrap(api.POST(faulty ? '/api/v1/gpus/{id}/mark-healthy/' : '/api/v1/gpus/{id}/mark-faulty/', {
        params: { path: { id: gpu.id } }, body: { reason, provider_at_fault: true },
      }))} />
  )
}

/** One host action: a reason is required, and it is asked for in a confirmation dialog. */
function HostActionButton({ host, action, workloads }: { host: Host; action: string; workloads?: Workloads }) {
  const qc = useQueryClient()
  const meta = HOST_ACTIONS[action] ?? { label: action, hint: '' }
  const running = workloads?.workloads ?? []
  const note = action === 'drain' && running.length > 0 ? (
    <Text size="sm" data-testid="drain-stays">
      Still running on it: {running.map((w) => `${w.name} (${w.organization.name})`).join(', ')}.
    </Text>
  ) : undefined
  return (
    <ReasonButton label={meta.label} title={`${meta.label} ${host.name}?`} hint={meta.hint} color={meta.color}
      note={note}
      action={(reason) => unwrap(api.POST(`/api/v1/hosts/{id}/${action}/` as ActionPath, {
        params: { path: { id: host.id } }, body: { reason, provider_at_fault: true },
      }))}
      onDone={(updated) => {
        qc.setQueryData(['host', host.id], updated)
        void qc.invalidateQueries({ queryKey: fleetKey })
        void qc.invalidateQueries({ queryKey: ['host-workloads', host.id] })
      }} />
  )
}

const SPARE_IN_HINT = 'Puts the host in the provider\'s spare pool: no new placement lands on it (on-demand, spot, '
  + 'queued work and leases skip it) until a lease on a failed host needs a replacement. What runs on it keeps running. '
  + 'A lease that waits for a spare of this model takes it at once, and the host leaves the pool again.'
const SPARE_OUT_HINT = 'Takes the host out of the spare pool: it takes new placements again like any host.'

/** Mark or unmark the host as a spare (`POST /hosts/{id}/spare/` with a reason, confirmed in a dialog). */
function SpareButton({ host }: { host: Host }) {
  const qc = useQueryClient()
  const spare = Boolean(host.spare)
  return (
    <ReasonButton label={spare ? 'Unmark spare' : 'Mark spare'} color="indigo.9"
      title={spare ? `Take ${host.name} out of the spare pool?` : `Make ${host.name} a spare?`}
      hint={spare ? SPARE_OUT_HINT : SPARE_IN_HINT}
      action={(reason) => unwrap(api.POST('/api/v1/hosts/{id}/spare/', {
        params: { path: { id: host.id } }, body: { spare: !spare, reason },
      }))}
      onDone={(updated) => {
        if (updated) qc.setQueryData(['host', host.id], updated)
        else void qc.invalidateQueries({ queryKey: ['host', host.id] })
        void qc.invalidateQueries({ queryKey: fleetKey })
        void qc.invalidateQueries({ queryKey: ['host-workloads', host.id] })
      }} />
  )
}

/** A GPU's heat-map state from its own row and what holds it (the fleet summary's rule: faulty, scrub failed,
 * dirty, allocated, free). */
export function gpuState(g: Pick<Gpu, 'index' | 'health' | 'scrub_state'>, held: Set<number>): string {
  if (g.health === 'faulty') return 'faulty'
  if (g.scrub_state === 'dirty' || g.scrub_state === 'scrub_failed') return g.scrub_state
  return held.has(g.index) ? 'allocated' : 'free'
}

function when(iso: string | null | undefined): string {
  return iso ? new Date(iso).toISOString().replace('T', ' ').slice(0, 16) + ' UTC' : ''
}

/** What a remediation says to the operator: where the VM is in its move. */
export function moveText(r: Workloads['remediations'][number]): string {
  switch (r.status) {
    case 'notice': return `moves at ${when(r.deadline_at)} (checkpoint notice sent)`
    case 'proposed': return 'waiting for the tenant to approve the move'
    case 'approved': case 'running': return r.reason ? `moving (${r.reason})` : 'moving'
    case 'succeeded': return `moved to ${r.to_host ?? 'another host'}`
    default: return r.reason ? `${r.status}: ${r.reason}` : r.status
  }
}

type GpuInstance = Gpu['gpu_instances'][number]

/** One GPU's MIG layout: its GPU instances by first memory slice, each with its profile name and the memory slices
 * it holds of the GPU's 8 (`[start, start + size)`), drawn as a strip of 8 with the free slices left blank and
 * listed in words beside it. `mig` (the fleet summary's "3g.40gb×2") stands in until the GPU itself is read. */
export function MigLayout({ gpu, instances, mode, summary }: {
  gpu: number; instances: GpuInstance[] | null; mode: string; summary: string
}) {
  if (instances === null) return <>{summary || '—'}</>
  if (!instances.length) return <>{mode === 'mig' ? 'MIG on, no GPU instance' : '—'}</>
  const sorted = [...instances].sort((a, b) => a.start - b.start)
  const used = sorted.reduce((n, gi) => n + gi.size, 0)
  return (
    <Stack gap={2}>
      <div className="mig-strip" aria-hidden="true">
        {sorted.map((gi) => (
          <span key={gi.start} className="mig-gi" style={{ gridColumn: `${gi.start + 1} / span ${gi.size}` }}
            title={`${gi.profile}: slices ${gi.start}–${gi.start + gi.size - 1}`}>{gi.profile}</span>
        ))}
      </div>
      <ul className="mig-list" aria-label={`MIG layout of GPU ${gpu}`}>
        {sorted.map((gi) => (
          <li key={gi.start} data-testid="mig-gi" data-profile={gi.profile} data-start={gi.start}>
            {gi.profile} <Text span size="xs" c="dimmed">slices {gi.start}–{gi.start + gi.size - 1}{gi.gi_id != null ? `, GI ${gi.gi_id}` : ''}</Text>
          </li>
        ))}
        {used < 8 && <li><Text span size="xs" c="dimmed">{8 - used} of 8 slices free</Text></li>}
      </ul>
    </Stack>
  )
}

/** The chosen host: its condition and agent, its GPUs, and the actions the server allows now. */
export function HostPanel({ row }: { row: FleetHost }) {
  const host = useQuery({
    queryKey: ['host', row.id],
    queryFn: () => unwrap(api.GET('/api/v1/hosts/{id}/', { params: { path: { id: row.id } } })),
  })
  const h = host.data
  const qc = useQueryClient()
  // while something moves (a drain, a remediation, a scrub) the panel follows it every 3 s, else every 15 s
  const seen = qc.getQueryData<Workloads>(['host-workloads', row.id])
  const seenGpus = qc.getQueryData<{ results: Gpu[] }>(['host-gpus', row.name])
  const live = (h?.state ?? row.condition) === 'draining' || Boolean(seen?.remediations.some((r) => OPEN_MOVES.has(r.status)))
    || Boolean(seenGpus?.results.some((g) => g.scrub_state === 'dirty'))
  const every = live ? 3_000 : 15_000
  const workloads = useQuery({
    queryKey: ['host-workloads', row.id], refetchInterval: every,
    queryFn: () => unwrap(api.GET('/api/v1/health/hosts/{host_id}/workloads/', { params: { path: { host_id: row.id } } })),
  })
  const gpus = useQuery({
    queryKey: ['host-gpus', row.name], refetchInterval: every,
    queryFn: () => unwrap(api.GET('/api/v1/gpus/', { params: { query: { host: row.name } } })),
  })
  const w = workloads.data
  const held = new Set((w?.workloads ?? []).flatMap((x) => x.gpus))
  const operator = Boolean(h && h.allowed_actions.length > 0)
  // the panel follows the host more often than the map: when it sees the GPUs change, the map is read again
  const panelStates = gpus.data && w
    ? [...gpus.data.results].sort((a, b) => a.index - b.index).map((g) => gpuState(g, held)).join(',') : null
  const mapStates = row.gpus.map((g) => g.state).join(',')
  useEffect(() => {
    if (panelStates !== null && panelStates !== mapStates) void qc.invalidateQueries({ queryKey: fleetKey })
  }, [panelStates, mapStates, qc])
  return (
    <Paper withBorder p="md" radius="md" data-testid="host-panel" aria-label={`Host ${row.name}`} component="section">
      <Stack gap="sm">
        <Group justify="space-between">
          <Title order={2} size="h4" ff="monospace">{row.name}</Title>
          <Group gap={6}>
            {(h?.spare ?? row.spare) && (
              <Badge color="indigo.9" variant="outline" data-testid="host-spare">spare</Badge>
            )}
            <Badge color={CONDITION_COLORS[h?.state ?? row.condition] ?? 'gray.7'} variant="filled" autoContrast
              data-testid="host-condition">
              {h?.state ?? row.condition}
            </Badge>
          </Group>
        </Group>
        {host.isError && <ProblemAlert error={host.error} />}
        <SimpleGrid cols={2} spacing={4} verticalSpacing={2}>
          <Text size="sm" c="dimmed">Reason</Text>
          <Text size="sm" data-testid="host-reason">{(h?.state_reason ?? row.condition_reason) || '—'}</Text>
          <Text size="sm" c="dimmed">GPU model</Text>
          <Text size="sm">{row.gpu_model ?? '—'}</Text>
          <Text size="sm" c="dimmed">Agent heartbeat</Text>
          <Text size="sm" data-testid="host-heartbeat">
            {row.last_heartbeat_at
              ? `${ago(row.last_heartbeat_at)}${row.agent_version ? ` (agent ${row.agent_version})` : ''}`
              : 'none yet: no node agent has enrolled on this host'}
          </Text>
          <Text size="sm" c="dimmed">Kind</Text>
          <Text size="sm">{row.provisioning_kind}</Text>
          <Text size="sm" c="dimmed">Spare pool</Text>
          <Text size="sm" data-testid="host-spare-pool">
            {(h?.spare ?? row.spare) ? 'yes: held out of placement for lease replacements' : 'no'}
          </Text>
          {h && (
            <>
              <Text size="sm" c="dimmed">Serial</Text>
              <Text size="sm" ff="monospace">{h.serial}</Text>
            </>
          )}
        </SimpleGrid>
        <Table.ScrollContainer minWidth={0} type="native">
        <Table striped withTableBorder verticalSpacing={2} horizontalSpacing="xs" aria-label={`GPUs of ${row.name}`}>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>GPU</Table.Th><Table.Th>State</Table.Th><Table.Th>Mode</Table.Th><Table.Th>MIG</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {(gpus.data && w
              ? gpus.data.results.map((g) => ({
                  index: g.index, state: gpuState(g, held), mode: g.mode, gpu: g,
                  mig: row.gpus.find((x) => x.index === g.index)?.mig ?? '',
                }))
              : row.gpus.map((g) => ({ ...g, gpu: null as Gpu | null }))
            ).sort((a, b) => a.index - b.index).map((g) => (
              <Table.Tr key={g.index} data-testid="host-gpu" data-index={g.index} data-state={g.state}>
                <Table.Td>{g.index}</Table.Td>
                <Table.Td>
                  <Group gap={6} wrap="nowrap">
                    {GPU_STATES.find((s) => s.state === g.state)?.label ?? g.state}
                    {operator && g.gpu && (
                      <GpuHealthButton gpu={g.gpu} host={row.name} onDone={() => {
                        void qc.invalidateQueries({ queryKey: ['host-gpus', row.name] })
                        void qc.invalidateQueries({ queryKey: fleetKey })
                      }} />
                    )}
                  </Group>
                </Table.Td>
                <Table.Td>{g.mode}</Table.Td>
                <Table.Td>
                  <MigLayout gpu={g.index} mode={g.mode ?? ''} summary={g.mig ?? ''} instances={g.gpu ? (g.gpu.gpu_instances ?? []) : null} />
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
        </Table.ScrollContainer>
        <Anchor component={Link} to={`/staff/health-events?host=${encodeURIComponent(row.name)}`} size="sm" c="indigo.9"
          data-testid="host-health-events">
          Health events of {row.name}
        </Anchor>
        <Title order={3} size="h5">Workloads on this host</Title>
        {workloads.isError && <ProblemAlert error={workloads.error} />}
        {w && (w.workloads.length ? (
          <Table withTableBorder verticalSpacing={2} aria-label={`Workloads on ${row.name}`} data-testid="host-workloads">
            <Table.Thead>
              <Table.Tr><Table.Th>Name</Table.Th><Table.Th>Organization / project</Table.Th><Table.Th>Status</Table.Th><Table.Th>On GPUs</Table.Th></Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {w.workloads.map((x) => (
                <Table.Tr key={x.id} data-testid="host-workload" data-name={x.name}>
                  <Table.Td>{x.name}{x.kind !== 'instance' && <Text span size="xs" c="dimmed"> ({x.kind.replace('_', ' ')})</Text>}</Table.Td>
                  <Table.Td>{x.organization.name} / {x.project.name}</Table.Td>
                  <Table.Td>{x.status}</Table.Td>
                  <Table.Td>{x.gpus.length ? x.gpus.map((i) => `GPU ${i}`).join(', ') : '—'}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        ) : <Text size="sm" c="dimmed" data-testid="host-workloads-none">Nothing runs on this host now.</Text>)}
        {w && w.remediations.length > 0 && (
          <>
            <Title order={3} size="h5">Moves off this host</Title>
            <Table withTableBorder verticalSpacing={2} aria-label={`Moves off ${row.name}`} data-testid="host-moves">
              <Table.Thead>
                <Table.Tr><Table.Th>Instance</Table.Th><Table.Th>Organization</Table.Th><Table.Th>Move</Table.Th></Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {w.remediations.map((r) => (
                  <Table.Tr key={r.id} data-testid="host-move" data-name={r.name} data-status={r.status}>
                    <Table.Td>{r.name || r.instance}</Table.Td>
                    <Table.Td>{r.organization.name}</Table.Td>
                    <Table.Td>{moveText(r)}</Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </>
        )}
        <Title order={3} size="h5">Actions</Title>
        {h && h.allowed_actions.length > 0 ? (
          <Group gap="xs" data-testid="host-actions">
            {h.allowed_actions.map((a) => <HostActionButton key={a} host={h} action={a} workloads={w} />)}
            {/* an operator's host that is not retired (retired hosts have no action): into or out of the pool */}
            <SpareButton host={h} />
          </Group>
        ) : (
          <Text size="sm" c="dimmed">
            {h ? 'No action is open to you on this host now (operators change host conditions).' : 'Loading…'}
          </Text>
        )}
      </Stack>
    </Paper>
  )
}

/** `/staff/fleet`: the fleet heat map (GET /fleet/summary/, every 15 s) with filters, a legend and a host's panel. */
export function AdminFleetPage() {
  const me = useMe()
  const staff = Boolean(me.data?.staff_role)
  // not waiting for /me/: the route's loader started it already (a tenant's answer is a 404)
  const summary = useQuery({ ...fleetQuery, refetchInterval: 15_000 })
  const [filters, setFilters] = useState<HeatMapFilters>({ gpuModel: null, condition: null, gpuState: null, spareOnly: false })
  const [selected, setSelected] = useState<string | null>(null)
  const select = useCallback((h: FleetHost) => setSelected(h.id), [])   // stable: unchanged rows do not redraw
  // on a narrow screen the panel is below the whole map: a chosen host's panel is scrolled into view (beside the map
  // it is sticky and seen already)
  const panel = useRef<HTMLDivElement>(null)
  useEffect(() => {
    const box = panel.current?.getBoundingClientRect()
    if (selected && box && (box.top >= window.innerHeight || box.bottom <= 0)) panel.current?.scrollIntoView?.({ block: 'start' })
  }, [selected])
  if (me.isPending) return null
  if (!staff || (summary.error instanceof ApiError && summary.error.status === 404)) return <NotFoundPage />
  const data = summary.data
  const row = data?.regions.flatMap((r) => r.zones.flatMap((z) => z.racks.flatMap((k) => k.hosts))).find((h) => h.id === selected)
  return (
    <Stack>
      <Title order={2}>Fleet</Title>
      {summary.isError && <ProblemAlert error={summary.error} />}
      {data && (
        <>
          <Group gap="lg" data-testid="fleet-counts">
            <Text size="sm">{data.host_count} hosts, {data.gpu_count} GPUs</Text>
            {GPU_STATES.map((s) => (
              <Text key={s.state} size="sm" c="dimmed">{s.label}: {data.gpu_states[s.state] ?? 0}</Text>
            ))}
          </Group>
          <Group align="end">
            <Select label="GPU model" placeholder="All models" clearable w={220} data={data.gpu_models}
              value={filters.gpuModel} onChange={(v) => setFilters({ ...filters, gpuModel: v })} />
            <Select label="Condition" placeholder="All conditions" clearable w={200} data={CONDITIONS}
              value={filters.condition} onChange={(v) => setFilters({ ...filters, condition: v })} />
            <Select label="GPU state" placeholder="Any GPU state" clearable w={220}
              data={GPU_STATES.map((s) => ({ value: s.state, label: s.label }))}
              value={filters.gpuState ?? null} onChange={(v) => setFilters({ ...filters, gpuState: v })} />
            <Checkbox label="Spares only" mb={8} checked={Boolean(filters.spareOnly)}
              onChange={(e) => setFilters({ ...filters, spareOnly: e.currentTarget.checked })} />
          </Group>
          <Legend />
          <Grid>
            <Grid.Col span={{ base: 12, md: 7 }}>
              <HeatMap summary={data} filters={filters} selected={selected} onSelect={select} />
            </Grid.Col>
            {/* the panel stays in view beside a long map (a host far down the page opens it where it is seen) */}
            <Grid.Col span={{ base: 12, md: 5 }} style={{ position: 'sticky', top: 80, alignSelf: 'flex-start' }} ref={panel}>
              {row ? <HostPanel row={row} /> : <Text c="dimmed">Choose a host to see its GPUs and actions.</Text>}
            </Grid.Col>
          </Grid>
        </>
      )}
    </Stack>
  )
}
