import { Badge, Button, Grid, Group, Modal, Paper, Select, SimpleGrid, Stack, Table, Text, Textarea, Title } from '@mantine/core'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useCallback, useState } from 'react'
import { ApiError, api, unwrap, type FleetHost, type Host } from '../../api/client'
import { useMe } from '../../auth/staff'
import { ProblemAlert, fieldError } from '../../components/ProblemAlert'
import { NotFoundPage } from '../NotFound'
import { fleetKey, fleetQuery } from './queries'
import { CONDITION_COLORS, GPU_STATES, HeatMap, Legend, type HeatMapFilters } from './HeatMap'

const CONDITIONS = ['available', 'cordoned', 'draining', 'maintenance', 'faulty', 'enrolling']

/** The host actions of the API (`POST /hosts/{id}/<action>/`), as the console names them. */
export const HOST_ACTIONS: Record<string, { label: string; color?: string; hint: string }> = {
  cordon: { label: 'Cordon', hint: 'No new placements land on it; what runs there keeps running.' },
  drain: { label: 'Drain', color: '#a33a00', hint: 'Cordon, then move or stop its workloads.' },
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

/** One host action: a reason is required, and it is asked for in a confirmation dialog. */
function HostActionButton({ host, action }: { host: Host; action: string }) {
  const qc = useQueryClient()
  const [opened, setOpened] = useState(false)
  const [reason, setReason] = useState('')
  const meta = HOST_ACTIONS[action] ?? { label: action, hint: '' }
  const run = useMutation({
    mutationFn: () =>
      unwrap(api.POST(`/api/v1/hosts/{id}/${action}/` as ActionPath, {
        params: { path: { id: host.id } }, body: { reason, provider_at_fault: true },
      })),
    onSuccess: (updated) => {
      qc.setQueryData(['host', host.id], updated)
      void qc.invalidateQueries({ queryKey: fleetKey })
      setOpened(false)
      setReason('')
    },
  })
  return (
    <>
      <Button size="xs" variant="filled" color={meta.color ?? 'blue.8'} onClick={() => setOpened(true)}>
        {meta.label}
      </Button>
      <Modal opened={opened} onClose={() => setOpened(false)} title={`${meta.label} ${host.name}?`} centered
        closeButtonProps={{ 'aria-label': 'Close' }}>
        <form onSubmit={(e) => { e.preventDefault(); run.mutate() }}>
          <Stack>
            <Text size="sm">{meta.hint}</Text>
            <Textarea label="Reason" description="Recorded on the host and in the audit log." required
              minRows={2} maxLength={500} value={reason} onChange={(e) => setReason(e.currentTarget.value)}
              error={fieldError(run.error, 'reason')} data-autofocus />
            <ProblemAlert error={run.error} shownFields={['reason']} />
            <Group justify="flex-end">
              <Button variant="default" onClick={() => setOpened(false)}>Cancel</Button>
              <Button type="submit" color={meta.color ?? 'blue.8'} loading={run.isPending} disabled={!reason.trim()}>
                {meta.label}
              </Button>
            </Group>
          </Stack>
        </form>
      </Modal>
    </>
  )
}

/** The chosen host: its condition and agent, its GPUs, and the actions the server allows now. */
export function HostPanel({ row }: { row: FleetHost }) {
  const host = useQuery({
    queryKey: ['host', row.id],
    queryFn: () => unwrap(api.GET('/api/v1/hosts/{id}/', { params: { path: { id: row.id } } })),
  })
  const h = host.data
  return (
    <Paper withBorder p="md" radius="md" data-testid="host-panel" aria-label={`Host ${row.name}`} component="section">
      <Stack gap="sm">
        <Group justify="space-between">
          <Title order={2} size="h4" ff="monospace">{row.name}</Title>
          <Badge color={CONDITION_COLORS[h?.state ?? row.condition] ?? 'gray.7'} variant="filled" autoContrast
            data-testid="host-condition">
            {h?.state ?? row.condition}
          </Badge>
        </Group>
        {host.isError && <ProblemAlert error={host.error} />}
        <SimpleGrid cols={2} spacing={4} verticalSpacing={2}>
          <Text size="sm" c="dimmed">Reason</Text>
          <Text size="sm" data-testid="host-reason">{(h?.state_reason ?? row.condition_reason) || '—'}</Text>
          <Text size="sm" c="dimmed">GPU model</Text>
          <Text size="sm">{row.gpu_model ?? '—'}</Text>
          <Text size="sm" c="dimmed">Agent heartbeat</Text>
          <Text size="sm">{ago(row.last_heartbeat_at)}{row.agent_version ? ` (agent ${row.agent_version})` : ''}</Text>
          <Text size="sm" c="dimmed">Kind</Text>
          <Text size="sm">{row.provisioning_kind}</Text>
          {h && (
            <>
              <Text size="sm" c="dimmed">Serial</Text>
              <Text size="sm" ff="monospace">{h.serial}</Text>
            </>
          )}
        </SimpleGrid>
        <Table striped withTableBorder verticalSpacing={2} aria-label={`GPUs of ${row.name}`}>
          <Table.Thead>
            <Table.Tr><Table.Th>GPU</Table.Th><Table.Th>State</Table.Th><Table.Th>Mode</Table.Th><Table.Th>MIG</Table.Th></Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {row.gpus.map((g) => (
              <Table.Tr key={g.index}>
                <Table.Td>{g.index}</Table.Td>
                <Table.Td>{GPU_STATES.find((s) => s.state === g.state)?.label ?? g.state}</Table.Td>
                <Table.Td>{g.mode}</Table.Td>
                <Table.Td>{g.mig || '—'}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
        <Title order={3} size="h5">Actions</Title>
        {h && h.allowed_actions.length > 0 ? (
          <Group gap="xs" data-testid="host-actions">
            {h.allowed_actions.map((a) => <HostActionButton key={a} host={h} action={a} />)}
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
  const [filters, setFilters] = useState<HeatMapFilters>({ gpuModel: null, condition: null })
  const [selected, setSelected] = useState<string | null>(null)
  const select = useCallback((h: FleetHost) => setSelected(h.id), [])   // stable: unchanged rows do not redraw
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
          </Group>
          <Legend />
          <Grid>
            <Grid.Col span={{ base: 12, md: 7 }}>
              <HeatMap summary={data} filters={filters} selected={selected} onSelect={select} />
            </Grid.Col>
            {/* the panel stays in view beside a long map (a host far down the page opens it where it is seen) */}
            <Grid.Col span={{ base: 12, md: 5 }} style={{ position: 'sticky', top: 80, alignSelf: 'flex-start' }}>
              {row ? <HostPanel row={row} /> : <Text c="dimmed">Choose a host to see its GPUs and actions.</Text>}
            </Grid.Col>
          </Grid>
        </>
      )}
    </Stack>
  )
}
