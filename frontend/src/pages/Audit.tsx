import { Badge, Button, Code, Group, Paper, SimpleGrid, Stack, Table, Text, TextInput, Title } from '@mantine/core'
import { useState, type FormEvent } from 'react'
import { api, unwrap, type AuditEvent } from '../api/client'
import { useScope } from '../auth/scope'
import { EmptyState } from '../components/EmptyState'
import { Pager } from '../components/Pager'
import { ProblemAlert, fieldError } from '../components/ProblemAlert'
import { usePaged } from '../hooks/usePaged'

export interface AuditFilters {
  action: string
  actor: string
  after: string
  before: string
}

const NO_FILTERS: AuditFilters = { action: '', actor: '', after: '', before: '' }

/** The `/audit-events/` query for the filters: only those given; the times (a `datetime-local` value, read as
 * UTC) as ISO 8601. */
export function auditQuery(organization: string, f: AuditFilters) {
  const iso = (local: string) => new Date(`${local}Z`).toISOString()
  return {
    organization,
    ...(f.action.trim() ? { action: f.action.trim() } : {}),
    ...(f.actor.trim() ? { actor: f.actor.trim() } : {}),
    ...(f.after ? { created_after: iso(f.after) } : {}),
    ...(f.before ? { created_before: iso(f.before) } : {}),
  }
}

/** What came of it: actions the API records for refused or failed attempts end in `_refused` or `_failed`
 * (`api_token.create_refused`, `session.login_failed`); every other event is a change that was made. */
export function auditResult(action: string): 'refused' | 'failed' | 'done' {
  if (action.endsWith('_refused')) return 'refused'
  if (action.endsWith('_failed')) return 'failed'
  return 'done'
}

function actorLabel(event: AuditEvent): string {
  if (!event.actor && !event.actor_email) return 'system'
  return event.actor_email || event.actor || ''
}

/** Audit events, newest first as given: time, actor (staff marked, with the token's prefix), action, object, result
 * and source address; with `organizationName`, an Organization column too (the admin portal's whole log); `compact`
 * (one object's events): time, actor, action and result only. The table is named `label`; rows carry `testId`. */
export function AuditTable({ events, organizationName, label = 'Audit events', testId = 'audit-event', compact = false }: {
  events: AuditEvent[]
  organizationName?: (id: string | null | undefined) => string
  label?: string
  testId?: string
  compact?: boolean
}) {
  return (
    <Table striped highlightOnHover={!compact} aria-label={label}>
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Time (UTC)</Table.Th>
          <Table.Th>Actor</Table.Th>
          {organizationName && <Table.Th>Organization</Table.Th>}
          <Table.Th>Action</Table.Th>
          {!compact && <Table.Th>Object</Table.Th>}
          <Table.Th>Result</Table.Th>
          {!compact && <Table.Th>Source</Table.Th>}
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {events.map((e) => {
          const result = auditResult(e.action)
          return (
            <Table.Tr key={e.id} data-testid={testId}>
              <Table.Td style={{ whiteSpace: 'nowrap' }}>{e.created_at.replace('T', ' ').slice(0, 19)}</Table.Td>
              <Table.Td>
                {actorLabel(e)}
                {!compact && e.actor_is_staff && (
                  <Badge ml={4} size="xs" variant="filled" color="gray.7">
                    staff
                  </Badge>
                )}
                {!compact && e.token_prefix && (
                  <Text size="xs" c="dimmed">
                    token <Code>{e.token_prefix}</Code>
                  </Text>
                )}
              </Table.Td>
              {organizationName && <Table.Td>{organizationName(e.organization)}</Table.Td>}
              <Table.Td>
                <Code>{e.action}</Code>
              </Table.Td>
              {!compact && (
                <Table.Td>
                  <Text size="sm">{e.target_type}</Text>
                  <Text size="xs" c="dimmed" style={{ wordBreak: 'break-all' }}>
                    {e.target_id}
                  </Text>
                </Table.Td>
              )}
              <Table.Td miw={84}>
                <Badge variant="filled" color={result === 'done' ? 'teal.9' : 'red.9'}>
                  {result}
                </Badge>
              </Table.Td>
              {!compact && <Table.Td>{e.source_ip ?? '—'}</Table.Td>}
            </Table.Tr>
          )
        })}
      </Table.Tbody>
    </Table>
  )
}

/** The organization's audit trail (`/audit-events/?organization=`, newest first): filter by action (exact or a
 * prefix ending in '.'), actor (e-mail or user id) and a UTC time range; server-paged. */
export function AuditPage() {
  const { organization } = useScope()
  const oid = organization?.id ?? ''
  const [draft, setDraft] = useState<AuditFilters>(NO_FILTERS)
  const [filters, setFilters] = useState<AuditFilters>(NO_FILTERS)
  const events = usePaged(['audit-events', oid, filters], (cursor) =>
    unwrap(api.GET('/api/v1/audit-events/', {
      params: { query: { ...auditQuery(oid, filters), cursor, page_size: 25 } },
    })),
  { enabled: Boolean(oid) })
  const apply = (next: AuditFilters) => {
    events.reset()
    setFilters(next)
  }
  const submit = (event: FormEvent) => {
    event.preventDefault()
    apply(draft)
  }
  const set = (key: keyof AuditFilters) => (e: { currentTarget: HTMLInputElement }) =>
    setDraft({ ...draft, [key]: e.currentTarget.value })
  const rows = events.data?.results ?? []
  const filtered = Object.values(filters).some(Boolean)

  return (
    <Stack>
      <Title order={2}>Audit log</Title>
      <Text c="dimmed">
        Every change in {organization?.name ?? 'the organization'} and its projects, every change refused there
        for lack of permission (<code>api.request.refused</code>) and every failed sign-in: who (and with which
        token), what, to which object, when and from where. Newest first; it cannot be edited.
      </Text>
      <Paper withBorder p="md" component="section" aria-labelledby="audit-filters">
        <form onSubmit={submit} noValidate>
          <Stack gap="sm">
            <Title order={3} size="h4" id="audit-filters">
              Filter
            </Title>
            <SimpleGrid cols={{ base: 1, sm: 2, lg: 4 }}>
              <TextInput label="Action" description="Exact, or a prefix ending in “.” (api_token.)" value={draft.action}
                onChange={set('action')} error={fieldError(events.error, 'action')} />
              <TextInput label="Actor" description="E-mail or user id" value={draft.actor} onChange={set('actor')}
                error={fieldError(events.error, 'actor')} />
              <TextInput label="From (UTC)" type="datetime-local" value={draft.after} onChange={set('after')}
                error={fieldError(events.error, 'created_after')} />
              <TextInput label="Before (UTC)" type="datetime-local" value={draft.before} onChange={set('before')}
                error={fieldError(events.error, 'created_before')} />
            </SimpleGrid>
            <Group>
              <Button type="submit">Apply filters</Button>
              <Button variant="default" disabled={!filtered && !Object.values(draft).some(Boolean)}
                onClick={() => {
                  setDraft(NO_FILTERS)
                  apply(NO_FILTERS)
                }}>
                Clear
              </Button>
            </Group>
          </Stack>
        </form>
      </Paper>
      <ProblemAlert error={events.error} title="The audit log could not be read"
        shownFields={['action', 'actor', 'created_after', 'created_before']} />
      {events.isSuccess && rows.length === 0 && !events.hasPrevious ? (
        <EmptyState title={filtered ? 'No events match' : 'No events yet'}>
          {filtered ? 'Widen the time range or clear the filters.' : 'Changes made in the organization appear here.'}
        </EmptyState>
      ) : (
        <AuditTable events={rows} />
      )}
      <Pager pageNumber={events.pageNumber} hasNext={events.hasNext} hasPrevious={events.hasPrevious}
        onNext={events.goNext} onPrevious={events.goPrevious} loading={events.isFetching} />
    </Stack>
  )
}
