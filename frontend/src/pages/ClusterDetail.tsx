import { Anchor, Group, Loader, Paper, Stack, Table, Text, Title } from '@mantine/core'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { Link, useParams } from 'react-router'
import { ApiError, api, unwrap } from '../api/client'
import { ConfirmButton } from '../components/ConfirmButton'
import { ProblemAlert } from '../components/ProblemAlert'
import { StatusBadge, TRANSITIONAL } from '../components/StatusBadge'
import { byId, gpuLabel, imageLabel, useFlavors, useImages } from '../hooks/catalog'
import { NotFoundPage } from './NotFound'

/** A member's index in its cluster: members are named `<cluster>-<i>` (i from 0), so the number after the
 * cluster's name; null for a name that is not of that form. */
export function memberIndex(cluster: string, member: string): number | null {
  const tail = member.startsWith(`${cluster}-`) ? member.slice(cluster.length + 1) : ''
  return /^\d+$/.test(tail) ? Number(tail) : null
}

/** The members in node order (0, 1, … 10, not 0, 1, 10, 2); a name not of the `<cluster>-<i>` form last, by name. */
export function byMemberIndex<T extends { name: string }>(cluster: string, members: T[]): T[] {
  const key = (m: T) => memberIndex(cluster, m.name) ?? Number.POSITIVE_INFINITY
  return [...members].sort((a, b) => key(a) - key(b) || a.name.localeCompare(b.name))
}

/** A cluster (`/clusters/{id}/`) with its member instances (`/instances/?cluster=`, in node order) and their states, refreshed
 * every second while anything changes and every two otherwise; delete it (all members go with it). */
export function ClusterDetailPage() {
  const { id = '' } = useParams()
  const qc = useQueryClient()
  const flavors = byId(useFlavors().data)
  const images = byId(useImages().data)
  const cluster = useQuery({
    queryKey: ['cluster', id],
    queryFn: () => unwrap(api.GET('/api/v1/clusters/{id}/', { params: { path: { id } } })),
    refetchInterval: (q) => (q.state.error ? false : q.state.data && TRANSITIONAL.has(q.state.data.status) ? 1000 : 2000),
  })
  const members = useQuery({
    queryKey: ['instances', 'cluster', id],
    queryFn: () => unwrap(api.GET('/api/v1/instances/', { params: { query: { cluster: id, page_size: 500 } } })),
    enabled: cluster.isSuccess,
    refetchInterval: 2000,
  })
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/api/v1/clusters/{id}/', { params: { path: { id } } })),
    onSuccess: (answer) => {
      qc.setQueryData(['cluster', id], answer)
      void qc.invalidateQueries({ queryKey: ['clusters'] })
    },
  })

  if (cluster.error instanceof ApiError && cluster.error.status === 404) return <NotFoundPage what="cluster" />
  if (cluster.isPending) return <Loader role="status" aria-label="Loading the cluster" />
  if (cluster.isError) return <ProblemAlert error={cluster.error} />
  const c = cluster.data
  const flavor = flavors.get(c.flavor)
  const gone = c.status === 'deleted' || c.status === 'deleting'
  const rows = byMemberIndex(c.name, members.data?.results ?? [])

  return (
    <Stack>
      <Anchor component={Link} to="/clusters" size="sm">
        ← Clusters
      </Anchor>
      <Group justify="space-between">
        <Group>
          <Title order={2}>{c.name}</Title>
          <StatusBadge status={c.status} />
        </Group>
        <ConfirmButton
          label="Delete cluster"
          title={`Delete the cluster “${c.name}”?`}
          message={`Its ${c.size} instances are deleted with it, with their disks. This cannot be undone.`}
          color="red.9"
          variant="outline"
          disabled={gone}
          loading={remove.isPending}
          onConfirm={() => remove.mutate()}
        />
      </Group>
      <ProblemAlert error={remove.error} title="The cluster was not deleted" />
      {c.error_code && (
        <ProblemAlert error={new Error(`${c.error_code}: ${c.error_reason}`)} title="The cluster failed" />
      )}
      <Paper withBorder p="md">
        <dl className="facts">
          <dt>Flavor</dt>
          <dd>{flavor ? `${flavor.name} · ${gpuLabel(flavor)}` : c.flavor}</dd>
          <dt>Image</dt>
          <dd>{imageLabel(images.get(c.image))}</dd>
          <dt>Size</dt>
          <dd>{c.size} instances</dd>
          <dt>Created</dt>
          <dd>{new Date(c.created_at).toLocaleString()}</dd>
        </dl>
      </Paper>
      <Title order={3} size="h4">
        Members
      </Title>
      <ProblemAlert error={members.error} />
      {rows.length === 0 ? (
        <Text c="dimmed">{members.isPending ? 'Loading…' : 'No member instances (yet).'}</Text>
      ) : (
        <Table striped highlightOnHover aria-label="Member instances">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Status</Table.Th>
              <Table.Th>Addresses</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((vm) => (
              <Table.Tr key={vm.id} data-testid="member">
                <Table.Td>
                  <Anchor component={Link} to={`/instances/${vm.id}`}>
                    {vm.name}
                  </Anchor>
                </Table.Td>
                <Table.Td>
                  <StatusBadge status={vm.status} />
                </Table.Td>
                <Table.Td>{vm.ports.flatMap((p) => p.fixed_ips).join(', ') || '—'}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </Stack>
  )
}
