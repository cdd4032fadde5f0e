import { Alert, Badge, Button, Code, CopyButton, Group, Paper, Select, SimpleGrid, Stack, Table, Text, TextInput, Title } from '@mantine/core'
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useSubmitOnce } from '../hooks/useSubmitOnce'
import { useState, type FormEvent } from 'react'
import { api, unwrap, type ApiToken, type ApiTokenCreated } from '../api/client'
import { useScope } from '../auth/scope'
import { useSession } from '../auth/session'
import { ConfirmButton } from '../components/ConfirmButton'
import { EmptyState } from '../components/EmptyState'
import { Pager } from '../components/Pager'
import { ProblemAlert, fieldError } from '../components/ProblemAlert'
import { usePaged } from '../hooks/usePaged'

export const LIFETIMES = [
  { value: '7', label: '7 days' },
  { value: '30', label: '30 days' },
  { value: '90', label: '90 days' },
  { value: '366', label: '366 days (the longest)' },
]

/** The `POST /tokens/` body for the form's choices: bound to the project or its organization, expiring `days` from
 * `now`. */
export function tokenBody(form: { name: string; scope: 'read' | 'write'; binding: 'project' | 'organization'; days: number },
  ids: { project: string; organization: string }, now: Date = new Date()) {
  const expires = new Date(now.getTime() + form.days * 86_400_000)
  return {
    name: form.name,
    scope: form.scope,
    staff: false,
    ...(form.binding === 'project' ? { project: ids.project } : { organization: ids.organization }),
    expires_at: expires.toISOString(),
  }
}

/** Where a token works: its project or organization, by name when the console knows it. */
function bindingLabel(token: ApiToken, names: Map<string, string>): string {
  if (token.project) return `project ${names.get(token.project) ?? token.project}`
  if (token.organization) return `organization ${names.get(token.organization) ?? token.organization}`
  return token.binding
}

function when(value: string | null | undefined, none: string): string {
  return value ? new Date(value).toLocaleString() : none
}

/** The caller's API tokens (`/tokens/?user_email=`): create one (the secret shown once), revoke one. */
export function TokensPage() {
  const { project, organization, organizations, projects } = useScope()
  const session = useSession()
  const email = session.data?.email ?? ''
  const qc = useQueryClient()
  const names = new Map<string, string>([
    ...organizations.map((o) => [o.id, o.name] as [string, string]),
    ...projects.map((p) => [p.id, p.name] as [string, string]),
  ])
  const tokens = usePaged(['tokens', email], (cursor) =>
    unwrap(api.GET('/api/v1/tokens/', { params: { query: { user_email: email, cursor, page_size: 50 } } })),
  { enabled: Boolean(email) })
  const [name, setName] = useState('')
  const [tokenScope, setTokenScope] = useState<'read' | 'write'>('read')
  const [binding, setBinding] = useState<'project' | 'organization'>('project')
  const [days, setDays] = useState('90')
  const [created, setCreated] = useState<ApiTokenCreated | null>(null)
  const create = useMutation({
    mutationFn: (): Promise<ApiTokenCreated> =>
      unwrap(api.POST('/api/v1/tokens/', {
        params: { header: { 'Idempotency-Key': submitCreate.idempotencyKey.current } },
        body: tokenBody({ name, scope: tokenScope, binding, days: Number(days) },
          { project: project?.id ?? '', organization: project?.organization ?? organization?.id ?? '' }),
      })),
    onSuccess: (token) => {
      setCreated(token)
      setName('')
      void qc.invalidateQueries({ queryKey: ['tokens'] })
    },
  })
  const revoke = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE('/api/v1/tokens/{id}/', { params: { path: { id } } })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['tokens'] }),
  })
  const submitCreate = useSubmitOnce(create)
  const submit = (event: FormEvent) => {
    event.preventDefault()
    setCreated(null)
    submitCreate()
  }
  const rows = tokens.data?.results ?? []
  const orgName = names.get(project?.organization ?? '') ?? organization?.name ?? 'the organization'

  return (
    <Stack>
      <Title order={2}>API tokens</Title>
      <Text c="dimmed">
        Tokens let scripts, the CLI and Terraform use the API as you (<code>Authorization: Bearer …</code>). A token
        never grants more than your own roles; a read token cannot change anything.
      </Text>
      <Paper withBorder p="md" component="section" aria-labelledby="create-token">
        <form onSubmit={submit} noValidate>
          <Stack gap="sm">
            <Title order={3} size="h4" id="create-token">
              Create a token
            </Title>
            <ProblemAlert error={create.error} title="The token was not created" shownFields={['name', 'scope', 'expires_at']} />
            <SimpleGrid cols={{ base: 1, sm: 2, lg: 4 }}>
              <TextInput
                label="Name"
                description="What it is for, e.g. terraform-ci"
                required
                maxLength={100}
                value={name}
                onChange={(e) => setName(e.currentTarget.value)}
                error={fieldError(create.error, 'name')}
              />
              <Select
                label="Scope"
                description="Read only, or read and write"
                data={[{ value: 'read', label: 'read' }, { value: 'write', label: 'write' }]}
                value={tokenScope}
                onChange={(v) => v && setTokenScope(v as 'read' | 'write')}
                allowDeselect={false}
                error={fieldError(create.error, 'scope')}
              />
              <Select
                label="Works in"
                description="One project, or the whole organization"
                data={[
                  { value: 'project', label: `project ${project?.name ?? ''}` },
                  { value: 'organization', label: `organization ${orgName}` },
                ]}
                value={binding}
                onChange={(v) => v && setBinding(v as 'project' | 'organization')}
                allowDeselect={false}
                error={fieldError(create.error, 'project') ?? fieldError(create.error, 'organization')}
              />
              <Select
                label="Expires after"
                description="It stops working then"
                data={LIFETIMES}
                value={days}
                onChange={(v) => v && setDays(v)}
                allowDeselect={false}
                error={fieldError(create.error, 'expires_at')}
              />
            </SimpleGrid>
            <Group>
              <Button type="submit" loading={create.isPending}>
                Create token
              </Button>
            </Group>
          </Stack>
        </form>
      </Paper>
      {created && (
        <Alert color="green" data-testid="new-token" withCloseButton aria-labelledby="new-token-title"
          closeButtonLabel="Dismiss" onClose={() => setCreated(null)}>
          <Stack gap="xs">
            <Title order={3} size="h5" id="new-token-title">
              Token “{created.name}” created
            </Title>
            <Text fw={700}>Copy it now: you will not see it again. The API keeps only its prefix.</Text>
            {created.token ? (
              <Group gap="xs" wrap="nowrap">
                <Code block style={{ flex: 1, wordBreak: 'break-all' }} data-testid="token-secret">
                  {created.token}
                </Code>
                <CopyButton value={created.token}>
                  {({ copied, copy }) => (
                    <Button variant={copied ? 'filled' : 'default'} color={copied ? 'teal' : undefined} onClick={copy}>
                      {copied ? 'Copied' : 'Copy'}
                    </Button>
                  )}
                </CopyButton>
              </Group>
            ) : (
              <Text>The secret was already shown in the first answer to this request.</Text>
            )}
          </Stack>
        </Alert>
      )}
      <ProblemAlert error={tokens.error ?? revoke.error} title={revoke.error ? 'The token was not revoked' : undefined} />
      {tokens.isSuccess && rows.length === 0 && !tokens.hasPrevious ? (
        <EmptyState title="No API tokens yet">
          Create one above for the CLI, Terraform or a CI job; it is shown once, so store it in your secret manager.
        </EmptyState>
      ) : (
        <Table striped highlightOnHover aria-label="API tokens">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Prefix</Table.Th>
              <Table.Th>Scope</Table.Th>
              <Table.Th>Works in</Table.Th>
              <Table.Th>Expires</Table.Th>
              <Table.Th>Last used</Table.Th>
              <Table.Th>
                <span className="visually-hidden">Actions</span>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((token) => (
              <Table.Tr key={token.id}>
                <Table.Td>{token.name}</Table.Td>
                <Table.Td>
                  <Code>{token.prefix}</Code>
                </Table.Td>
                <Table.Td>{token.scope}</Table.Td>
                <Table.Td>{bindingLabel(token, names)}</Table.Td>
                <Table.Td>{when(token.expires_at, 'never')}</Table.Td>
                <Table.Td>{when(token.last_used_at, 'never')}</Table.Td>
                <Table.Td ta="right">
                  {token.revoked_at ? (
                    <Badge color="gray.7" variant="filled" title={when(token.revoked_at, '')}>
                      revoked
                    </Badge>
                  ) : (
                    <ConfirmButton
                      label="Revoke"
                      aria-label={`Revoke token ${token.name}`}
                      title={`Revoke the token “${token.name}”?`}
                      message="Anything using it gets 401 from now on, and so do the tokens minted with it. This cannot be undone."
                      color="red.9"
                      variant="outline"
                      size="xs"
                      allowed
                      loading={revoke.isPending && revoke.variables === token.id}
                      onConfirm={() => revoke.mutate(token.id)}
                    />
                  )}
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
      <Pager
        pageNumber={tokens.pageNumber}
        hasNext={tokens.hasNext}
        hasPrevious={tokens.hasPrevious}
        onNext={tokens.goNext}
        onPrevious={tokens.goPrevious}
        loading={tokens.isFetching}
      />
    </Stack>
  )
}
