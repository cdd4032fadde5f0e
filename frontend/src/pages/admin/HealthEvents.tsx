import { Badge, Button, Code, Group, Paper, Select, SimpleGrid, Stack, Table, Text, TextInput, Title } from '@mantine/core'
import { useQuery } from '@tanstack/react-query'
import { useState, type FormEvent } from 'react'
import { useSearchParams } from 'react-router'
import { ApiError, api, unwrap, type Schemas } from '../../api/client'
import type { paths } from '../../api/schema'
import { useMe } from '../../auth/staff'
import { EmptyState } from '../../components/EmptyState'
import { Pager } from '../../components/Pager'
import { ProblemAlert, fieldError } from '../../components/ProblemAlert'
import { usePaged } from '../../hooks/usePaged'
import { NotFoundPage } from '../NotFound'

type StaffHealthEvent = Schemas['StaffHealthEventOutput']
type EventKind = NonNullable<NonNullable<paths['/api/v1/health/events/']['get']['parameters']['query']>['kind']>

/** The kinds of signal the API knows (apps/health/states.py EventKind), in words. */
export const EVENT_KINDS: Record<string, string> = {
  xid: 'NVIDIA XID error', ecc_dbe: 'ECC double-bit error', ecc_sbe: 'ECC single-bit error',
  row_remap_failure: 'HBM row remap failure', nvlink_down: 'NVLink down', pcie_degraded: 'PCIe link degraded',
  thermal: 'Thermal violation', fallen_off_bus: 'GPU fallen off the bus', ib_port_down: 'InfiniBand port down',
  heartbeat_lost: 'Agent heartbeat lost', device_op_failed: 'Device operation failed', tenant_report: 'Tenant report',
  ib_link_flap: 'InfiniBand link flap', ib_port_errors: 'InfiniBand port errors',
  ib_rate_degraded: 'InfiniBand port below rate', nvswitch_fatal: 'NVSwitch fatal error',
  nvswitch_nonfatal: 'NVSwitch non-fatal error', fabric_incomplete: 'GPU fabric not registered',
  fabric_manager_down: 'Fabric Manager down',
}

export interface HealthFilters {
  host: string
  kind: string
  classification: string
  after: string
  before: string
}

export const NO_HEALTH_FILTERS: HealthFilters = { host: '', kind: '', classification: '', after: '', before: '' }

/** The `/health/events/` query for the filters: only those given; the times (a `datetime-local` value, read as
 * UTC) as ISO 8601. */
export function healthQuery(f: HealthFilters) {
  const iso = (local: string) => new Date(`${local}Z`).toISOString()
  return {
    ...(f.host.trim() ? { host: f.host.trim() } : {}),
    ...(f.kind ? { kind: f.kind as EventKind } : {}),
    ...(f.classification ? { classification: f.classification } : {}),
    ...(f.after ? { observed_after: iso(f.after) } : {}),
    ...(f.before ? { observed_before: iso(f.before) } : {}),
  }
}

/** "XID 48", "Thermal violation", "NVSwitch fatal error SXid 24007": what was observed, in words. */
export function eventText(e: Pick<StaffHealthEvent, 'kind' | 'xid' | 'count'>): string {
  const label = EVENT_KINDS[e.kind] ?? e.kind
  const what = e.xid == null ? label : e.kind === 'xid' ? `XID ${e.xid}` : `${label} SXid ${e.xid}`
  return e.count > 1 ? `${what} ×${e.count}` : what
}

/** "GPU 1", "port mlx5_0", "NVSwitch 0000:07:00.0 port 32", "host": the device the event is about. */
export function deviceText(e: Pick<StaffHealthEvent, 'gpu_index' | 'hca_port'> &
  Partial<Pick<StaffHealthEvent, 'nvswitch' | 'nvswitch_port'>>): string {
  if (e.gpu_index != null) return `GPU ${e.gpu_index}`
  if (e.hca_port) return `port ${e.hca_port}`
  if (e.nvswitch) return `NVSwitch ${e.nvswitch}${e.nvswitch_port != null ? ` port ${e.nvswitch_port}` : ''}`
  return 'host'
}

const FIELDS = ['host', 'kind', 'classification', 'observed_after', 'observed_before']

/** `/staff/health-events`: every health event of the fleet (`GET /health/events/`, any staff role; anyone else
 * Not found), newest observed first, server-paged: when, where (host and GPU or port), what, the class the rules
 * gave it, what ingest did and the tenant resources it touched. Filters: host (`?host=` opens it filtered, as the
 * host panel links it), kind, class and a UTC time range. */
export function AdminHealthEventsPage() {
  const me = useMe()
  const staff = Boolean(me.data?.staff_role)
  const [params] = useSearchParams()
  const initial = { ...NO_HEALTH_FILTERS, host: params.get('host') ?? '' }
  const [draft, setDraft] = useState<HealthFilters>(initial)
  const [filters, setFilters] = useState<HealthFilters>(initial)
  const table = useQuery({
    queryKey: ['health-classification'], enabled: staff, staleTime: 300_000,
    queryFn: () => unwrap(api.GET('/api/v1/health/classification/')),
  })
  const events = usePaged(['staff-health-events', filters], (cursor) =>
    unwrap(api.GET('/api/v1/health/events/', { params: { query: { ...healthQuery(filters), cursor, page_size: 50 } } })),
  { enabled: staff, refetchInterval: 30_000 })
  if (me.isPending) return null
  if (!staff || (events.error instanceof ApiError && events.error.status === 404)) return <NotFoundPage />

  const apply = (next: HealthFilters) => {
    events.reset()
    setFilters(next)
  }
  const submit = (event: FormEvent) => {
    event.preventDefault()
    apply(draft)
  }
  const classes = [...new Set((table.data?.rows ?? []).map((r) => r.class))].sort()
  const rows = events.data?.results ?? []
  const filtered = Object.values(filters).some(Boolean)

  return (
    <Stack>
      <Title order={2}>Health events</Title>
      <Text c="dimmed" maw={820}>
        Every fault signal of the fleet (node agents, staff injections, the control plane), newest first: where it was
        seen, what it was, the class the classification table gave it and what the control plane did about it
        (docs/health.md). Tenants see only the events that touched their resources.
      </Text>
      <Paper withBorder p="md" component="section" aria-labelledby="health-filters">
        <form onSubmit={submit} noValidate>
          <Stack gap="sm">
            <Title order={3} size="h4" id="health-filters">Filter</Title>
            <SimpleGrid cols={{ base: 1, sm: 2, lg: 5 }}>
              <TextInput label="Host" description="Its name, exactly" value={draft.host}
                onChange={(e) => setDraft({ ...draft, host: e.currentTarget.value })} error={fieldError(events.error, 'host')} />
              <Select label="Kind" description="What was observed" value={draft.kind || null} clearable placeholder="Any kind"
                data={Object.entries(EVENT_KINDS).map(([value, label]) => ({ value, label }))}
                onChange={(v) => setDraft({ ...draft, kind: v ?? '' })} error={fieldError(events.error, 'kind')} />
              <Select label="Class" description="What the rules made of it" value={draft.classification || null} clearable
                placeholder="Any class" data={classes} searchable
                onChange={(v) => setDraft({ ...draft, classification: v ?? '' })} error={fieldError(events.error, 'classification')} />
              <TextInput label="From (UTC)" type="datetime-local" value={draft.after}
                onChange={(e) => setDraft({ ...draft, after: e.currentTarget.value })} error={fieldError(events.error, 'observed_after')} />
              <TextInput label="Before (UTC)" type="datetime-local" value={draft.before}
                onChange={(e) => setDraft({ ...draft, before: e.currentTarget.value })} error={fieldError(events.error, 'observed_before')} />
            </SimpleGrid>
            <Group>
              <Button type="submit">Apply filters</Button>
              <Button variant="default" disabled={!filtered && !Object.values(draft).some(Boolean)}
                onClick={() => { setDraft(NO_HEALTH_FILTERS); apply(NO_HEALTH_FILTERS) }}>
                Clear
              </Button>
            </Group>
          </Stack>
        </form>
      </Paper>
      <ProblemAlert error={events.error} title="The health events could not be read" shownFields={FIELDS} />
      {events.isSuccess && rows.length === 0 && !events.hasPrevious ? (
        <EmptyState title={filtered ? 'No events match' : 'No health events yet'}>
          {filtered ? 'Widen the time range or clear the filters.' : 'Fault signals from the fleet appear here.'}
        </EmptyState>
      ) : (
        <Table striped aria-label="Health events">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Observed (UTC)</Table.Th><Table.Th>Host</Table.Th><Table.Th>Event</Table.Th><Table.Th>Class</Table.Th>
              <Table.Th>Done</Table.Th><Table.Th ta="right">Tenant resources</Table.Th><Table.Th>Source</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((e) => (
              <Table.Tr key={e.id} data-testid="health-event" data-host={e.host} data-kind={e.kind}>
                <Table.Td style={{ whiteSpace: 'nowrap' }}>{e.observed_at.replace('T', ' ').slice(0, 19)}</Table.Td>
                <Table.Td>
                  <Text size="sm" ff="monospace">{e.host}</Text>
                  <Text size="xs" c="dimmed">{deviceText(e)}</Text>
                </Table.Td>
                <Table.Td>
                  <Text size="sm">{eventText(e)}</Text>
                  {e.message && <Text size="xs" c="dimmed">{e.message}</Text>}
                </Table.Td>
                <Table.Td>{e.classification ? <Code>{e.classification}</Code> : <Text size="sm" c="dimmed">no rule matched</Text>}</Table.Td>
                <Table.Td>
                  <Text size="sm">{e.actions.length ? e.actions.join(', ').replace(/_/g, ' ') : 'nothing'}</Text>
                  {e.pending.length > 0 && <Text size="xs" c="dimmed">pending: {e.pending.join(', ').replace(/_/g, ' ')}</Text>}
                  {e.incident && <Badge mt={2} size="xs" variant="filled" color="red.9">incident</Badge>}
                </Table.Td>
                <Table.Td ta="right">{e.impact_count}</Table.Td>
                <Table.Td>{e.source.replace('_', ' ')}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
      <Pager pageNumber={events.pageNumber} hasNext={events.hasNext} hasPrevious={events.hasPrevious}
        onNext={events.goNext} onPrevious={events.goPrevious} loading={events.isFetching} />
    </Stack>
  )
}
