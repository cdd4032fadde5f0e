import { Anchor, Button, Code, Group, Loader, Paper, ScrollArea, SimpleGrid, Stack, Tabs, Text, Title } from '@mantine/core'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { Link, useNavigate, useParams } from 'react-router'
import { ApiError, api, unwrap, type Instance, type Operation } from '../api/client'
import { ConfirmButton } from '../components/ConfirmButton'
import { ProblemAlert } from '../components/ProblemAlert'
import { StatusBadge, TRANSITIONAL } from '../components/StatusBadge'
import { byId, gpuLabel, imageLabel, sizeLabel, useFlavors, useImages } from '../hooks/catalog'
import { NotFoundPage } from './NotFound'

/** How often the detail asks the server: every second while something is changing, else every two, so a change
 * made anywhere shows at most about two seconds late. */
export function pollInterval(instance: Instance | undefined, operation: Operation | undefined): number {
  if (operation && (operation.status === 'pending' || operation.status === 'running')) return 1000
  return instance && TRANSITIONAL.has(instance.status) ? 1000 : 2000
}

type Action = 'stop' | 'start' | 'reboot'

export function InstanceDetailPage() {
  const { id = '' } = useParams()
  const qc = useQueryClient()
  const navigate = useNavigate()
  const [operationId, setOperationId] = useState<string | null>(null)
  const flavors = byId(useFlavors().data)
  const images = byId(useImages().data)

  const operation = useQuery({
    queryKey: ['operation', operationId],
    queryFn: () => unwrap(api.GET('/api/v1/operations/{id}/', { params: { path: { id: operationId! } } })),
    enabled: Boolean(operationId),
    refetchInterval: (q) => (q.state.data && ['succeeded', 'failed', 'cancelled'].includes(q.state.data.status) ? false : 1000),
  })
  const instance = useQuery({
    queryKey: ['instance', id],
    queryFn: () => unwrap(api.GET('/api/v1/instances/{id}/', { params: { path: { id } } })),
    refetchInterval: (q) => (q.state.error ? false : pollInterval(q.state.data, operation.data)),
  })
  const action = useMutation({
    mutationFn: (verb: Action) => {
      const path = { params: { path: { id } } }
      if (verb === 'stop') return unwrap(api.POST('/api/v1/instances/{id}/stop/', { ...path, body: { hard: false } }))
      if (verb === 'start') return unwrap(api.POST('/api/v1/instances/{id}/start/', path))
      return unwrap(api.POST('/api/v1/instances/{id}/reboot/', { ...path, body: { hard: false } }))
    },
    onSuccess: (accepted) => {
      qc.setQueryData(['instance', id], accepted.instance)
      setOperationId(accepted.operation.id)
      void qc.invalidateQueries({ queryKey: ['instances'] })
    },
  })
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/api/v1/instances/{id}/', { params: { path: { id } } })),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['instances'] })
      void qc.invalidateQueries({ queryKey: ['instance', id] })
    },
  })
  const [showLog, setShowLog] = useState(false)
  const log = useQuery({
    queryKey: ['console-log', id],
    queryFn: () => unwrap(api.GET('/api/v1/instances/{id}/console-log/', { params: { path: { id } } })),
    enabled: showLog,
    refetchInterval: showLog ? 5000 : false,
  })

  if (instance.error instanceof ApiError && instance.error.status === 404) return <NotFoundPage what="instance" />
  if (instance.isPending) return <Loader role="status" aria-label="Loading the instance" />
  if (instance.isError) return <ProblemAlert error={instance.error} />

  const vm = instance.data
  const flavor = flavors.get(vm.flavor)
  const gone = vm.status === 'deleted' || vm.status === 'deleting'
  const busy = action.isPending || remove.isPending || TRANSITIONAL.has(vm.status)
  const op = operation.data

  return (
    <Stack>
      <Anchor component={Link} to="/instances" size="sm">
        ← Instances
      </Anchor>
      <Group justify="space-between" align="center">
        <Group>
          <Title order={2}>{vm.name}</Title>
          <StatusBadge status={vm.status} />
          {TRANSITIONAL.has(vm.status) && <Loader role="status" size="xs" aria-label="Working" />}
        </Group>
        <Group gap="xs">
          <ConfirmButton
            label="Stop"
            title={`Stop ${vm.name}?`}
            message="The guest is asked to shut down (ACPI). Its disk and addresses are kept; GPUs stay reserved while it is stopped."
            variant="default"
            disabled={busy || vm.status !== 'active'}
            onConfirm={() => action.mutate('stop')}
          />
          <ConfirmButton
            label="Start"
            title={`Start ${vm.name}?`}
            message="The instance boots again on its host."
            variant="default"
            disabled={busy || vm.status !== 'stopped'}
            onConfirm={() => action.mutate('start')}
          />
          <ConfirmButton
            label="Reboot"
            title={`Reboot ${vm.name}?`}
            message="The guest is asked to restart; unsaved work in it is lost."
            variant="default"
            disabled={busy || vm.status !== 'active'}
            onConfirm={() => action.mutate('reboot')}
          />
          <ConfirmButton
            label="Delete"
            title={`Delete ${vm.name}?`}
            message="The instance and its disk are destroyed and its GPUs released. This cannot be undone."
            confirmLabel="Delete instance"
            color="red.9"
            disabled={remove.isPending || gone}
            onConfirm={() => remove.mutate(undefined, { onSuccess: () => navigate('/instances') })}
          />
        </Group>
      </Group>
      <ProblemAlert error={action.error ?? remove.error} title="The action was refused" />
      {vm.status === 'error' && (
        <ProblemAlert error={new Error(`${vm.error_code}: ${vm.error_reason}`)} title="The instance failed" />
      )}
      {op && (
        <Text size="sm" c="dimmed" aria-live="polite" data-testid="operation">
          Operation {op.kind}: {op.status}
          {op.step ? ` (step ${op.step})` : ''}
          {op.error_detail ? ` — ${op.error_detail}` : ''}
        </Text>
      )}
      <Tabs defaultValue="overview" onChange={(tab) => setShowLog(tab === 'log')} keepMounted={false}>
        <Tabs.List>
          <Tabs.Tab value="overview">Overview</Tabs.Tab>
          <Tabs.Tab value="log">Console log</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="overview" pt="md">
          <SimpleGrid cols={{ base: 1, sm: 2 }}>
            <Paper withBorder p="md">
              <dl className="facts">
                <dt>Flavor</dt>
                <dd>{flavor ? `${flavor.name} — ${gpuLabel(flavor)}` : vm.flavor}</dd>
                <dt>Size</dt>
                <dd>{flavor ? sizeLabel(flavor) : '—'}</dd>
                <dt>Image</dt>
                <dd>{imageLabel(images.get(vm.image))}</dd>
                <dt>Power state</dt>
                <dd>{vm.observed_state || '—'}</dd>
              </dl>
            </Paper>
            <Paper withBorder p="md">
              <dl className="facts">
                <dt>ID</dt>
                <dd>
                  <Code>{vm.id}</Code>
                </dd>
                <dt>Addresses</dt>
                <dd>{vm.ports.flatMap((p) => p.fixed_ips).join(', ') || 'none (no subnet)'}</dd>
                <dt>Created</dt>
                <dd>{new Date(vm.created_at).toLocaleString()}</dd>
                <dt>Launched</dt>
                <dd>{vm.launched_at ? new Date(vm.launched_at).toLocaleString() : '—'}</dd>
                <dt>Health</dt>
                <dd>
                  <Anchor component={Link} to={`/health-events?instance=${vm.id}`}>
                    Health events of {vm.name}
                  </Anchor>
                </dd>
              </dl>
            </Paper>
          </SimpleGrid>
        </Tabs.Panel>
        <Tabs.Panel value="log" pt="md">
          <ProblemAlert error={log.error} title="No console log" color="gray" />
          {log.isPending && showLog && <Loader role="status" size="sm" aria-label="Loading the console log" />}
          {log.data && (
            <ScrollArea h={360} type="auto">
              <Code block data-testid="console-log">
                {log.data.log || '(the console is empty so far)'}
              </Code>
            </ScrollArea>
          )}
          <Button variant="subtle" size="xs" mt="xs" onClick={() => void log.refetch()} disabled={!showLog}>
            Refresh
          </Button>
        </Tabs.Panel>
      </Tabs>
    </Stack>
  )
}
