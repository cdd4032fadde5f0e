import { Anchor, Badge, Group, Loader, Paper, Progress, SimpleGrid, Stack, Table, Text, Title } from '@mantine/core'
import { useQuery } from '@tanstack/react-query'
import { useState } from 'react'
import { Link } from 'react-router'
import { api, unwrap, type Flavor, type Instance } from '../api/client'
import { useScope } from '../auth/scope'
import { EmptyState } from '../components/EmptyState'
import { ProblemAlert } from '../components/ProblemAlert'
import { money, notForRole, useInvoicePreview } from '../hooks/billing'
import { byId, useFlavors } from '../hooks/catalog'
import { classLabel, signalLabel } from './HealthEvents'
import { quotaAmount, quotaLabel, quotaScope } from '../quota'
import { shortId } from '../shortId'

/** How far back the dashboard looks for health events on the project's resources. */
export const HEALTH_WINDOW_DAYS = 7

/** Instances that hold GPUs: every one that is not stopped, deleted or failed. */
const HOLDING = new Set(['pending', 'provisioning', 'active', 'starting', 'stopping', 'rebooting', 'resizing'])

export interface GpuUse {
  model: string
  gpus: number
  slices: Record<string, number>
}

/** GPUs in use by model: whole GPUs (gpu_count) and fractions (MIG profiles, vGPU types) per model. */
export function gpusInUse(instances: Instance[], flavors: Map<string, Flavor>): GpuUse[] {
  const byModel = new Map<string, GpuUse>()
  for (const instance of instances) {
    if (!HOLDING.has(instance.status)) continue
    const flavor = flavors.get(instance.flavor)
    if (!flavor || !flavor.gpu_model || flavor.gpu_form === 'none') continue
    const use = byModel.get(flavor.gpu_model) ?? { model: flavor.gpu_model, gpus: 0, slices: {} }
    if (flavor.gpu_form === 'gpu') use.gpus += flavor.gpu_count
    else {
      const kind = flavor.gpu_form === 'mig' ? `MIG ${flavor.mig_profile}` : flavor.gpu_form === 'vgpu' ? `vGPU ${flavor.vgpu_type}` : 'shared'
      use.slices[kind] = (use.slices[kind] ?? 0) + 1
    }
    byModel.set(flavor.gpu_model, use)
  }
  return [...byModel.values()].sort((a, b) => a.model.localeCompare(b.model))
}

function Stat({ label, value, to }: { label: string; value: string | number; to?: string }) {
  return (
    <Paper withBorder p="md" radius="md">
      <Text size="sm" c="dimmed">
        {label}
      </Text>
      <Text fz={32} fw={700} data-testid={`stat-${label}`}>
        {to ? (
          <Anchor component={Link} to={to} inherit underline="never">
            {value}
          </Anchor>
        ) : (
          value
        )}
      </Text>
    </Paper>
  )
}

/** Spend this month to date: the organization's invoice preview total (the Billing screen's), or why it is not
 * shown (the server does not let this role read the bills). SLA credits on this month's invoice (an earlier month's
 * credit whose next invoice this is, ADR 0607) are named beside it with the charges, so a total they bring down is
 * not read as the month's spend. */
function Spend({ organization }: { organization: string }) {
  const preview = useInvoicePreview(organization)
  const p = preview.data
  return (
    <Paper withBorder p="md" radius="md" data-testid="spend">
      <Text size="sm" c="dimmed">
        Spend this month to date
      </Text>
      {preview.isPending && <Loader role="status" size="sm" aria-label="Loading the month to date" />}
      {p && (
        <>
          <Text fz={32} fw={700} data-testid="stat-spend">
            <Anchor component={Link} to="/billing" inherit underline="never">
              {money(p.total, p.currency)}
            </Anchor>
          </Text>
          <Text size="xs" c="dimmed">
            {p.period}, {p.status === 'draft' ? 'an estimate from the usage recorded so far' : 'invoiced'} (whole organization)
          </Text>
          {Number(p.credits ?? 0) < 0 && (
            <Text size="xs" c="dimmed" data-testid="spend-credits">
              Charges {money(p.subtotal, p.currency)}, less {money(String(-Number(p.credits)), p.currency)} of SLA credits on this invoice
            </Text>
          )}
        </>
      )}
      {preview.isError && (
        <Text size="sm" c="dimmed" data-testid="spend-not-available">
          {notForRole(preview.error) ? 'Only owners, admins and billing members see the organization’s spend.' : preview.error.message}
        </Text>
      )}
    </Paper>
  )
}

/** Health events on the project's instances over the last `HEALTH_WINDOW_DAYS` days (`/health-events/?project=
 * &observed_after=`, newest first, refreshed every 30 s): the fault, the instance, when, and whether the provider is
 * at fault; the Health events screen has them all. */
function RecentHealth({ project }: { project: string }) {
  const [since] = useState(() => new Date(Date.now() - HEALTH_WINDOW_DAYS * 86_400_000).toISOString())
  const events = useQuery({
    queryKey: ['health-events', project, 'dashboard', since],
    queryFn: () => unwrap(api.GET('/api/v1/health-events/', { params: { query: { project, observed_after: since, page_size: 5 } } })),
    enabled: Boolean(project),
    refetchInterval: 30_000,
  })
  const rows = events.data?.results ?? []
  return (
    <Paper withBorder p="md" radius="md" component="section" aria-labelledby="health-heading" data-testid="recent-health">
      <Group justify="space-between" mb="sm">
        <Title order={3} size="h4" id="health-heading">
          Health events, last {HEALTH_WINDOW_DAYS} days
        </Title>
        <Anchor component={Link} to="/health-events" size="sm">
          All health events
        </Anchor>
      </Group>
      <ProblemAlert error={events.error} />
      {events.isPending && <Loader role="status" size="sm" aria-label="Loading health events" />}
      {events.isSuccess && rows.length === 0 && (
        <Text c="dimmed" size="sm" data-testid="health-none">
          No faults were seen on this project’s instances in the last {HEALTH_WINDOW_DAYS} days.
        </Text>
      )}
      {rows.length > 0 && (
        <Table aria-label="Recent health events">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Fault</Table.Th>
              <Table.Th>Instance</Table.Th>
              <Table.Th>Observed</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((e) => (
              <Table.Tr key={`${e.event}-${e.resource_id}`} data-testid="recent-health-event">
                <Table.Td>
                  {classLabel(e.classification)}{' '}
                  {e.provider_at_fault && <Badge color="red.9" variant="filled" size="sm">provider fault</Badge>}
                  <Text size="xs" c="dimmed">{signalLabel(e)}</Text>
                </Table.Td>
                <Table.Td>
                  <Anchor component={Link} to={`/health-events?instance=${e.resource_id}`} size="sm">
                    {shortId(e.resource_id)}
                  </Anchor>
                </Table.Td>
                <Table.Td>{new Date(e.observed_at).toLocaleString()}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
      {events.data?.next && <Text size="xs" c="dimmed" mt="xs">More on the Health events screen.</Text>}
    </Paper>
  )
}

export function DashboardPage() {
  const { project, organization } = useScope()
  const pid = project?.id ?? ''
  const flavors = byId(useFlavors().data)
  const instances = useQuery({
    queryKey: ['instances', pid, 'dashboard'],
    queryFn: () => unwrap(api.GET('/api/v1/instances/', { params: { query: { project: pid, page_size: 500 } } })),
    refetchInterval: 5000,
  })
  const clusters = useQuery({
    queryKey: ['clusters', pid],
    queryFn: () => unwrap(api.GET('/api/v1/clusters/', { params: { query: { project: pid, page_size: 500 } } })),
    refetchInterval: 10000,
  })
  const quotas = useQuery({
    queryKey: ['quotas', organization?.id],
    queryFn: () =>
      unwrap(api.GET('/api/v1/quotas/', { params: { query: { organization: organization!.id, page_size: 500 } } })),
    enabled: Boolean(organization),
    refetchInterval: 10000,
  })

  const all = instances.data?.results ?? []
  const running = all.filter((i) => i.status === 'active').length
  const more = instances.data?.next ? '+' : ''
  const runningClusters = (clusters.data?.results ?? []).filter((c) => c.status === 'active').length
  const gpus = gpusInUse(all, flavors)
  const quotaRows = (quotas.data?.results ?? []).filter((q) => q.project === null || q.project === pid)

  return (
    <Stack>
      <Title order={2}>Dashboard</Title>
      <Text c="dimmed">
        {organization?.name} / {project?.name}
      </Text>
      <ProblemAlert error={instances.error ?? clusters.error ?? quotas.error} />
      <SimpleGrid cols={{ base: 1, sm: 2, lg: 4 }}>
        <Stat label="Running instances" value={`${running}${more}`} to="/instances" />
        <Stat label="Running clusters" value={runningClusters} />
        <Stat label="GPUs in use" value={gpus.reduce((n, g) => n + g.gpus, 0)} />
        <Spend organization={organization?.id ?? ''} />
      </SimpleGrid>
      <SimpleGrid cols={{ base: 1, md: 2 }}>
        <Paper withBorder p="md" radius="md" component="section" aria-labelledby="gpus-heading">
          <Title order={3} size="h4" id="gpus-heading" mb="sm">
            GPUs in use by model
          </Title>
          {gpus.length === 0 ? (
            <EmptyState
              title="No GPUs in use"
              action={
                <Anchor component={Link} to="/instances/new">
                  Launch an instance
                </Anchor>
              }
            >
              Nothing in this project holds a GPU right now.
            </EmptyState>
          ) : (
            <Table aria-label="GPUs in use by model">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Model</Table.Th>
                  <Table.Th>Whole GPUs</Table.Th>
                  <Table.Th>Slices</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {gpus.map((g) => (
                  <Table.Tr key={g.model}>
                    <Table.Td>{g.model}</Table.Td>
                    <Table.Td>{g.gpus}</Table.Td>
                    <Table.Td>
                      {Object.entries(g.slices)
                        .map(([kind, n]) => `${n}× ${kind}`)
                        .join(', ') || '—'}
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          )}
        </Paper>
        <Paper withBorder p="md" radius="md" component="section" aria-labelledby="quota-heading">
          <Title order={3} size="h4" id="quota-heading" mb="sm">
            Quota use
          </Title>
          {quotas.isPending && <Loader role="status" size="sm" aria-label="Loading quotas" />}
          {quotaRows.length === 0 && quotas.isSuccess && <Text c="dimmed">No quotas are set for this organization.</Text>}
          <Stack gap="sm" data-testid="quota-use">
            {quotaRows.map((q) => {
              const used = q.usage ?? 0
              const pct = q.limit > 0 ? Math.min(100, (100 * used) / q.limit) : 100
              const label = `${quotaLabel(q.resource)} (${quotaScope(q.scope)})`
              return (
                <div key={q.id}>
                  <Group justify="space-between" gap="xs">
                    <Text size="sm" id={`quota-${q.id}`}>
                      {label}
                    </Text>
                    <Text size="sm" c="dimmed">
                      {quotaAmount(q.resource, used)} of {quotaAmount(q.resource, q.limit)}
                    </Text>
                  </Group>
                  <Progress.Root>
                    <Progress.Section
                      value={pct}
                      color={pct >= 90 ? 'red.9' : pct >= 70 ? 'yellow.6' : 'indigo'}
                      aria-label={`${label}: ${quotaAmount(q.resource, used)} of ${quotaAmount(q.resource, q.limit)}`}
                    />
                  </Progress.Root>
                </div>
              )
            })}
          </Stack>
        </Paper>
      </SimpleGrid>
      <RecentHealth project={pid} />
    </Stack>
  )
}
