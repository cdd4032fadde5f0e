import { Anchor, Group, Loader, Paper, Progress, SimpleGrid, Stack, Table, Text, Title } from '@mantine/core'
import { useQuery } from '@tanstack/react-query'
import { Link } from 'react-router'
import { api, unwrap, type Flavor, type Instance } from '../api/client'
import { useScope } from '../auth/scope'
import { EmptyState } from '../components/EmptyState'
import { ProblemAlert } from '../components/ProblemAlert'
import { byId, useFlavors } from '../hooks/catalog'

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
      <SimpleGrid cols={{ base: 1, sm: 3 }}>
        <Stat label="Running instances" value={`${running}${more}`} to="/instances" />
        <Stat label="Running clusters" value={runningClusters} />
        <Stat label="GPUs in use" value={gpus.reduce((n, g) => n + g.gpus, 0)} />
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
              const label = `${q.resource} (${q.scope})`
              return (
                <div key={q.id}>
                  <Group justify="space-between" gap="xs">
                    <Text size="sm" id={`quota-${q.id}`}>
                      {label}
                    </Text>
                    <Text size="sm" c="dimmed">
                      {used} of {q.limit}
                    </Text>
                  </Group>
                  <Progress.Root>
                    <Progress.Section
                      value={pct}
                      color={pct >= 90 ? 'red.9' : pct >= 70 ? 'yellow.6' : 'indigo'}
                      aria-label={`${label}: ${used} of ${q.limit}`}
                    />
                  </Progress.Root>
                </div>
              )
            })}
          </Stack>
        </Paper>
      </SimpleGrid>
    </Stack>
  )
}
