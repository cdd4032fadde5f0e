import { Anchor, Badge, Code, Group, Stack, Table, Text, Title } from '@mantine/core'
import { useQueries } from '@tanstack/react-query'
import { Link, useSearchParams } from 'react-router'
import { api, unwrap, type Schemas } from '../api/client'
import type { paths } from '../api/schema'
import { useScope } from '../auth/scope'
import { EmptyState } from '../components/EmptyState'
import { ChoiceFilter, FilterBar } from '../components/ListFilters'
import { NoMatch } from '../components/ResourceTable'
import { Pager } from '../components/Pager'
import { ProblemAlert } from '../components/ProblemAlert'
import { useListFilters } from '../hooks/useListFilters'
import { usePaged } from '../hooks/usePaged'

export type HealthEvent = Schemas['HealthEventOutput']

// Words for the fault classes of the provider's classification table (apps/health/classification.yaml); a class
// not listed here reads as its own name with spaces.
type EventKind = NonNullable<NonNullable<paths['/api/v1/health-events/']['get']['parameters']['query']>['kind']>
const EVENT_KINDS: { value: EventKind; label: string }[] = (['xid', 'ecc_dbe', 'ecc_sbe', 'row_remap_failure', 'thermal', 'pcie_degraded',
  'fallen_off_bus', 'nvlink_down', 'ib_port_down', 'heartbeat_lost', 'device_op_failed', 'tenant_report'] as EventKind[])
  .map((k) => ({ value: k, label: k === 'xid' ? 'XID' : k.replaceAll('_', ' ') }))

const CLASS_WORDS: Record<string, string> = {
  application: 'Application error',
  ecc_contained: 'GPU memory error (contained)',
  ecc_uncontained: 'GPU memory error (not contained)',
  fabric_degraded: 'InfiniBand fabric degraded',
  gpu_degraded: 'GPU degraded',
  gsp_error: 'GPU System Processor error',
  gpu_lost: 'GPU lost',
  gpu_memory_degrading: 'GPU memory degrading',
  gpu_memory_remap_failed: 'GPU memory row remap failed',
  gpu_memory_remap_pending: 'GPU memory row remap pending',
  gpu_memory_uncorrectable: 'GPU memory uncorrectable error',
  host_unreachable: 'Host unreachable',
  nvlink_error: 'NVLink error',
  observe: 'Observed (no action)',
  tenant_report: 'Reported by you',
  unclassified: 'Not classified',
}

/** The fault class in words (`gpu_lost` → "GPU lost"). */
export function classLabel(klass: string): string {
  if (!klass) return 'Not classified'
  return CLASS_WORDS[klass] ?? klass.replaceAll('_', ' ')
}

/** The event's signal: the kind, and the XID number for an XID. */
export function signalLabel(event: Pick<HealthEvent, 'kind' | 'xid' | 'count'>): string {
  const base = event.kind === 'xid' && event.xid !== null && event.xid !== undefined ? `XID ${event.xid}` : event.kind.replaceAll('_', ' ')
  return event.count > 1 ? `${base} (× ${event.count})` : base
}

/** Health events that touched the project's instances (`/health-events/?project=`, newest first; one row per
 * affected instance): the fault class, the signal, when it was observed, the instance (linked) and whether the
 * provider is at fault (then its downtime is not charged and counts against the SLA). `?instance=<id>` shows one
 * instance's events (the instance detail links here). */
export function HealthEventsPage() {
  const { project } = useScope()
  const pid = project?.id ?? ''
  const [params] = useSearchParams()
  const instance = params.get('instance') ?? ''
  const filters = useListFilters({ kind: null as EventKind | null })
  const events = usePaged(['health-events', pid, instance, filters.query], (cursor) =>
    unwrap(api.GET('/api/v1/health-events/', {
      params: { query: { project: pid, ...filters.query, cursor, page_size: 25, ...(instance ? { resource_id: instance } : {}) } },
    })),
  { enabled: Boolean(pid), refetchInterval: 10_000 })
  const rows = events.data?.results ?? []
  const ids = [...new Set([...(instance ? [instance] : []), ...rows.map((r) => r.resource_id)])]
  const names = useQueries({
    queries: ids.map((id) => ({
      queryKey: ['instance', id],
      queryFn: () => unwrap(api.GET('/api/v1/instances/{id}/', { params: { path: { id } } })),
      staleTime: 30_000,
      retry: false,
    })),
  })
  const nameOf = new Map(ids.map((id, i) => [id, names[i]?.data?.name]))
  const instanceName = instance ? nameOf.get(instance) ?? instance : ''

  return (
    <Stack>
      <Title order={2}>{instance ? `Health events of ${instanceName}` : 'Health events'}</Title>
      <Text c="dimmed">
        Faults the provider's monitoring saw on the GPUs and hosts under {instance ? 'this instance' : `${project?.name ?? 'the project'}'s instances`},
        newest first. When the provider is at fault, the downtime is not charged and counts against the SLA.
      </Text>
      {instance && (
        <Group gap="md">
          <Anchor component={Link} to={`/instances/${instance}`} size="sm">
            ← {instanceName}
          </Anchor>
          <Anchor component={Link} to="/health-events" size="sm">
            Every instance
          </Anchor>
        </Group>
      )}
      <FilterBar label="Filter health events">
        <ChoiceFilter filters={filters} param="kind" label="Filter by fault" placeholder="Any fault" data={EVENT_KINDS} w={220} />
      </FilterBar>
      <ProblemAlert error={events.error} />
      {events.isSuccess && rows.length === 0 && !events.hasPrevious ? filters.active ? <NoMatch noun="health events" filters={filters} /> : (
        <EmptyState title="No health events">
          Nothing has gone wrong on the hardware under {instance ? 'this instance' : 'your instances'}. Events appear here
          as the provider's monitoring reports them.
        </EmptyState>
      ) : (
        <Table striped highlightOnHover aria-label="Health events">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Class</Table.Th>
              <Table.Th>Signal</Table.Th>
              <Table.Th>Observed</Table.Th>
              <Table.Th>Instance</Table.Th>
              <Table.Th>Provider at fault</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((e) => (
              <Table.Tr key={`${e.event}-${e.resource_id}`} data-testid="health-event">
                <Table.Td>{classLabel(e.classification)}</Table.Td>
                <Table.Td>{signalLabel(e)}</Table.Td>
                <Table.Td>
                  <time dateTime={e.observed_at}>{new Date(e.observed_at).toLocaleString()}</time>
                </Table.Td>
                <Table.Td>
                  <Anchor component={Link} to={`/instances/${e.resource_id}`}>
                    {nameOf.get(e.resource_id) ?? <Code>{e.resource_id}</Code>}
                  </Anchor>
                </Table.Td>
                <Table.Td>
                  {e.provider_at_fault ? (
                    <Badge variant="filled" color="red.9">
                      yes
                    </Badge>
                  ) : (
                    <Text size="sm">no</Text>
                  )}
                </Table.Td>
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
