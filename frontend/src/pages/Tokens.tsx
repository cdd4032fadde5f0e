import { Alert, Badge, Button, Code, CopyButton, Group, Select, SimpleGrid, Stack, Text, TextInput, Title } from '@mantine/core'
import { useState, type FormEvent } from 'react'
import { api, unwrap, type ApiToken, type ApiTokenCreated } from '../api/client'
import { useScope } from '../auth/scope'
import { useSession } from '../auth/session'
import { CreateForm } from '../components/CreateForm'
import { DeleteButton } from '../components/DeleteButton'
import { ChoiceFilter, FilterBar } from '../components/ListFilters'
import { ProblemAlert } from '../components/ProblemAlert'
import { ResourceTable } from '../components/ResourceTable'
import { useCreateForm } from '../hooks/useCreateForm'
import { useListFilters } from '../hooks/useListFilters'
import { usePaged } from '../hooks/usePaged'
import { useRemove } from '../hooks/useRemove'

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

/** The `/tokens/` filters as sent: `revoked` and `scope` when chosen. */
export function tokenFilterQuery(query: { revoked?: 'true' | 'false'; scope?: 'read' | 'write' }) {
  return {
    ...(query.revoked ? { revoked: query.revoked === 'true' } : {}),
    ...(query.scope ? { scope: query.scope } : {}),
  }
}

/** The caller's API tokens (`/tokens/?user_email=`): create one (the secret shown once), revoke one; filter by state
 * (`revoked`) and scope. */
export function TokensPage() {
  const { project, organization, organizations, projects } = useScope()
  const session = useSession()
  const email = session.data?.email ?? ''
  const names = new Map<string, string>([
    ...organizations.map((o) => [o.id, o.name] as [string, string]),
    ...projects.map((p) => [p.id, p.name] as [string, string]),
  ])
  const filters = useListFilters({ revoked: null as 'true' | 'false' | null, scope: null as 'read' | 'write' | null })
  const tokens = usePaged(['tokens', email, filters.query], (cursor) =>
    unwrap(api.GET('/api/v1/tokens/', {
      params: { query: { user_email: email, ...tokenFilterQuery(filters.query), cursor, page_size: 50 } },
    })),
  { enabled: Boolean(email) })
  const [created, setCreated] = useState<ApiTokenCreated | null>(null)
  const create = useCreateForm({ name: '', scope: 'read' as 'read' | 'write', binding: 'project' as 'project' | 'organization', days: '90' }, {
    mutationFn: (v, idempotencyKey): Promise<ApiTokenCreated> =>
      unwrap(api.POST('/api/v1/tokens/', {
        params: { header: { 'Idempotency-Key': idempotencyKey } },
        body: tokenBody({ ...v, binding: project ? v.binding : 'organization', days: Number(v.days) },
          { project: project?.id ?? '', organization: project?.organization ?? organization?.id ?? '' }),
      })),
    invalidate: ['tokens'],
    clear: ['name'],
    onSuccess: (token) => setCreated(token),
  })
  // the secret's banner goes once its token is revoked: there is nothing left worth copying
  const revoke = useRemove((id: string) => unwrap(api.DELETE('/api/v1/tokens/{id}/', { params: { path: { id } } })), ['tokens'],
    (id) => setCreated((shown) => (shown?.id === id ? null : shown)))
  const submit = (event: FormEvent) => {
    setCreated(null)
    create.submit(event)
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
      <CreateForm id="create-token" title="Create a token" error={create.error} errorTitle="The token was not created"
        fields={['name', 'scope', 'expires_at']} onSubmit={submit} submitLabel="Create token"
        loading={create.mutation.isPending} allowed>
        <SimpleGrid cols={{ base: 1, sm: 2, lg: 4 }}>
          <TextInput label="Name" description="What it is for, e.g. terraform-ci" required maxLength={100} {...create.text('name')} />
          <Select
            label="Scope"
            description="Read only, or read and write"
            data={[{ value: 'read', label: 'read' }, { value: 'write', label: 'write' }]}
            value={create.values.scope}
            onChange={(v) => v && create.set('scope', v as 'read' | 'write')}
            allowDeselect={false}
            error={create.errorOf('scope')}
          />
          <Select
            label="Works in"
            description="One project, or the whole organization"
            data={[
              { value: 'project', label: project ? `project ${project.name}` : 'a project (none yet)', disabled: !project },
              { value: 'organization', label: `organization ${orgName}` },
            ]}
            value={project ? create.values.binding : 'organization'}
            onChange={(v) => v && create.set('binding', v as 'project' | 'organization')}
            allowDeselect={false}
            error={create.errorOf('project') ?? create.errorOf('organization')}
          />
          <Select
            label="Expires after"
            description="It stops working then"
            data={LIFETIMES}
            value={create.values.days}
            onChange={(v) => v && create.set('days', v)}
            allowDeselect={false}
            error={create.errorOf('expires_at')}
          />
        </SimpleGrid>
      </CreateForm>
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
      <FilterBar label="Filter API tokens">
        <ChoiceFilter filters={filters} param="revoked" label="Filter by state" placeholder="Active and revoked" w={210}
          data={[{ value: 'false', label: 'active' }, { value: 'true', label: 'revoked' }]} />
        <ChoiceFilter filters={filters} param="scope" label="Filter by scope" placeholder="Any scope" data={['read', 'write']} />
      </FilterBar>
      <ProblemAlert error={tokens.error ?? revoke.error} title={revoke.error ? 'The token was not revoked' : undefined} />
      <ResourceTable
        label="API tokens"
        noun="tokens"
        rows={rows}
        rowKey={(token) => token.id}
        list={tokens}
        filters={filters}
        empty={{
          title: 'No API tokens yet',
          text: 'Create one above for the CLI, Terraform or a CI job; it is shown once, so store it in your secret manager.',
        }}
        columns={[
          { header: 'Name', cell: (token) => token.name },
          { header: 'Prefix', cell: (token) => <Code>{token.prefix}</Code> },
          { header: 'Scope', cell: (token) => token.scope },
          { header: 'Works in', cell: (token) => bindingLabel(token, names) },
          { header: 'Expires', cell: (token) => when(token.expires_at, 'never') },
          { header: 'Last used', cell: (token) => when(token.last_used_at, 'never') },
        ]}
        actions={(token) => token.revoked_at ? (
          <Badge color="gray.7" variant="filled" title={when(token.revoked_at, '')}>
            revoked
          </Badge>
        ) : (
          <DeleteButton remove={revoke} target={token.id} label="Revoke" name={`Revoke token ${token.name} (${token.prefix})`}
            title={`Revoke the token “${token.name}” (${token.prefix}…)?`} allowed
            message={`The token starting ${token.prefix}, last used ${when(token.last_used_at, 'never')}. Anything using it gets 401 from now on, and so do the tokens minted with it. This cannot be undone.`} />
        )}
      />
    </Stack>
  )
}
