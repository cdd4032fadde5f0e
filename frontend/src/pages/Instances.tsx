import { Anchor, Button, Group, Stack, Table, Text, Title } from '@mantine/core'
import { Link } from 'react-router'
import { useScope } from '../auth/scope'
import { EmptyState } from '../components/EmptyState'
import { ChoiceFilter, FilterBar, SearchFilter } from '../components/ListFilters'
import { Pager } from '../components/Pager'
import { ProblemAlert } from '../components/ProblemAlert'
import { NoMatch } from '../components/ResourceTable'
import { StatusBadge } from '../components/StatusBadge'
import { byId, gpuLabel, useFlavors } from '../hooks/catalog'
import { fetchInstancesPage, instancesKey, type InstanceStatus as Status } from '../hooks/instances'
import { useListFilters } from '../hooks/useListFilters'
import { usePaged } from '../hooks/usePaged'

const STATUSES: Status[] = ['pending', 'provisioning', 'active', 'stopping', 'stopped', 'starting', 'rebooting',
  'resizing', 'deleting', 'error']

export function InstancesPage() {
  const { project, canWrite } = useScope()
  const pid = project?.id ?? ''
  const filters = useListFilters({ status: null as Status | null, name_contains: '' })
  const status = filters.query.status
  const flavors = byId(useFlavors().data)
  // the same query as the route's loader starts (loaders.ts): the first page is often here before the screen
  const list = usePaged(instancesKey(pid, filters.query), (cursor) => fetchInstancesPage(pid, filters.query, cursor), {
    refetchInterval: 2000,
  })
  const rows = (list.data?.results ?? []).filter((i) => i.status !== 'deleted' || status === 'deleted')

  return (
    <Stack>
      <Group justify="space-between">
        <Title order={2}>Instances</Title>
        <Group>
          <FilterBar label="Filter instances">
            <SearchFilter filters={filters} />
            <ChoiceFilter filters={filters} param="status" label="Filter by status" placeholder="Any status" data={STATUSES} />
          </FilterBar>
          <Button component={Link} to="/instances/new" disabled={!canWrite}>
            Launch instance
          </Button>
        </Group>
      </Group>
      <ProblemAlert error={list.error} />
      {list.isSuccess && rows.length === 0 && !list.hasPrevious ? (
        filters.active ? <NoMatch noun="instances" filters={filters} /> : (
          <EmptyState
            title="No instances yet"
            action={canWrite ? <Button component={Link} to="/instances/new">Launch an instance</Button> : undefined}
          >
            Launch a GPU instance: choose a flavor, an image and your SSH key; it is usually active within a minute.
          </EmptyState>
        )
      ) : (
        <Table striped highlightOnHover aria-label="Instances">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Status</Table.Th>
              <Table.Th>Flavor</Table.Th>
              <Table.Th>GPUs</Table.Th>
              <Table.Th>Address</Table.Th>
              <Table.Th>Created</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((instance) => {
              const flavor = flavors.get(instance.flavor)
              return (
                <Table.Tr key={instance.id}>
                  <Table.Td>
                    <Anchor component={Link} to={`/instances/${instance.id}`}>
                      {instance.name}
                    </Anchor>
                  </Table.Td>
                  <Table.Td>
                    <StatusBadge status={instance.status} />
                  </Table.Td>
                  <Table.Td>{flavor?.name ?? '—'}</Table.Td>
                  <Table.Td>{flavor ? gpuLabel(flavor) : '—'}</Table.Td>
                  <Table.Td>
                    <Text size="sm" ff="monospace">
                      {instance.ports.flatMap((p) => p.fixed_ips).join(', ') || '—'}
                    </Text>
                  </Table.Td>
                  <Table.Td>{new Date(instance.created_at).toLocaleString()}</Table.Td>
                </Table.Tr>
              )
            })}
          </Table.Tbody>
        </Table>
      )}
      <Pager
        pageNumber={list.pageNumber}
        hasNext={list.hasNext}
        hasPrevious={list.hasPrevious}
        onNext={list.goNext}
        onPrevious={list.goPrevious}
        loading={list.isFetching}
      />
    </Stack>
  )
}
