import { Anchor, Button, Group, Select, Stack, Table, Text, Title } from '@mantine/core'
import { useState } from 'react'
import { Link } from 'react-router'
import { api, unwrap, type Schemas } from '../api/client'
import { useScope } from '../auth/scope'
import { EmptyState } from '../components/EmptyState'
import { Pager } from '../components/Pager'
import { ProblemAlert } from '../components/ProblemAlert'
import { StatusBadge } from '../components/StatusBadge'
import { byId, gpuLabel, useFlavors } from '../hooks/catalog'
import { usePaged } from '../hooks/usePaged'

type Status = Schemas['InstanceOutputStatusEnum']
const STATUSES: Status[] = ['pending', 'provisioning', 'active', 'stopping', 'stopped', 'starting', 'rebooting',
  'resizing', 'deleting', 'error']
export const PAGE_SIZE = 20

export function InstancesPage() {
  const { project, canWrite } = useScope()
  const pid = project?.id ?? ''
  const [status, setStatus] = useState<Status | null>(null)
  const flavors = byId(useFlavors().data)
  const list = usePaged(
    ['instances', pid, status ?? 'all'],
    (cursor) =>
      unwrap(api.GET('/api/v1/instances/', {
        params: { query: { project: pid, cursor, page_size: PAGE_SIZE, ...(status ? { status } : {}) } },
      })),
    { refetchInterval: 2000 },
  )
  const rows = (list.data?.results ?? []).filter((i) => i.status !== 'deleted' || status === 'deleted')

  return (
    <Stack>
      <Group justify="space-between">
        <Title order={2}>Instances</Title>
        <Group>
          <Select
            aria-label="Filter by status"
            placeholder="Any status"
            clearable
            data={STATUSES}
            value={status}
            onChange={(v) => {
              setStatus(v as Status | null)
              list.reset()
            }}
            w={180}
          />
          <Button component={Link} to="/instances/new" disabled={!canWrite}>
            Launch instance
          </Button>
        </Group>
      </Group>
      <ProblemAlert error={list.error} />
      {list.isSuccess && rows.length === 0 && !list.hasPrevious ? (
        <EmptyState
          title={status ? `No ${status} instances` : 'No instances yet'}
          action={canWrite && !status ? <Button component={Link} to="/instances/new">Launch an instance</Button> : undefined}
        >
          {status
            ? 'Clear the status filter to see the others.'
            : 'Launch a GPU instance: choose a flavor, an image and your SSH key; it is usually active within a minute.'}
        </EmptyState>
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
