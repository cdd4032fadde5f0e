import { Badge, Button, Code, Group, Paper, SimpleGrid, Stack, Table, Text, TextInput, Title } from '@mantine/core'
import { useState, type FormEvent } from 'react'
import { api, unwrap, type AuditEvent } from '../api/client'
import { useScope } from '../auth/scope'
import { EmptyState } from '../components/EmptyState'
import { Pager } from '../components/Pager'
import { ProblemAlert, fieldError } from '../components/ProblemAlert'
import { usePaged } from '../hooks/usePaged'
import { shortId } from '../shortId'

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

/** The fields an event's own `before`/`after` may name its object by, in order: what the object was called when
 * it changed (a deleted object's name survives here). */
const NAME_KEYS = ['name', 'display_number', 'hostname', 'email', 'slug']

/** The object's name: the server's `target_name` (staff: its name now), else a name the event recorded in
 * `after` or `before`, else null (the table shows the id). */
export function auditTargetName(event: Pick<AuditEvent, 'before' | 'after'> & { target_name?: string | null }): string | null {
  if (event.target_name) return event.target_name
  for (const side of [event.after, event.before]) {
    if (!side || typeof side !== 'object') continue
    for (const key of NAME_KEYS) {
      const v = (side as Record<string, unknown>)[key]
      if (typeof v === 'string' && v) return v
    }
  }
  return null
}

/** "host: cordon", "session: login failed" — an action code (`inventory.host.cordon`) in words: its object, then
 * what was done. */
export function actionText(action: string): string {
  const parts = action.split('.')
  const words = (w: string) => w.replace(/_/g, ' ')
  if (parts.length < 2) return words(action)
  return `${words(parts[parts.length - 2])}: ${words(parts[parts.length - 1])}`
}

export interface AuditChange {
  field: string
  /** 'changed' (both sides), 'set' (after only: a create, or a new field), 'removed' (before only) */
  kind: 'changed' | 'set' | 'removed'
  before: string
  after: string
}

function valueText(v: unknown): string {
  if (v === null || v === undefined || v === '') return '—'
  if (typeof v === 'string') return v
  return JSON.stringify(v)
}

/** What changed, field by field, from the event's `before` and `after` (the changed fields the service recorded,
 * never secrets): a field on both sides with another value is "changed", on one side only "set" or "removed";
 * a field with the same value on both sides is left out. In the order the fields first appear. */
export function auditChanges(event: Pick<AuditEvent, 'before' | 'after'>): AuditChange[] {
  const before = (event.before && typeof event.before === 'object' ? event.before : {}) as Record<string, unknown>
  const after = (event.after && typeof event.after === 'object' ? event.after : {}) as Record<string, unknown>
  const out: AuditChange[] = []
  for (const field of [...new Set([...Object.keys(before), ...Object.keys(after)])]) {
    const inBefore = field in before
    const inAfter = field in after
    if (inBefore && inAfter && JSON.stringify(before[field]) === JSON.stringify(after[field])) continue
    out.push({ field, kind: inBefore && inAfter ? 'changed' : inAfter ? 'set' : 'removed',
      before: valueText(before[field]), after: valueText(after[field]) })
  }
  return out
}

const SHOWN_CHANGES = 4

/** The event's changes as a short list: "limit 8 → 16", "reason: PSU swap"; past four, a count of the rest. */
function Changes({ event }: { event: AuditEvent }) {
  const changes = auditChanges(event)
  if (!changes.length) return <Text size="sm" c="dimmed">—</Text>
  const cut = (v: string) => (v.length > 60 ? `${v.slice(0, 59)}…` : v)
  return (
    <ul className="audit-changes" data-testid="audit-changes">
      {changes.slice(0, SHOWN_CHANGES).map((c) => (
        <li key={c.field} data-field={c.field} data-kind={c.kind}
          title={c.kind === 'changed' ? `${c.field}: ${c.before} → ${c.after}` : `${c.field}: ${c.kind === 'removed' ? c.before : c.after}`}>
          <Text span size="sm" fw={600}>{c.field.replace(/_/g, ' ')}</Text>{' '}
          {c.kind === 'changed' ? (
            <>
              <Text span size="sm" td="line-through" c="dimmed">{cut(c.before)}</Text>
              <Text span size="sm"> → {cut(c.after)}</Text>
            </>
          ) : c.kind === 'removed' ? (
            <Text span size="sm" c="dimmed">(was {cut(c.before)})</Text>
          ) : (
            <Text span size="sm">{cut(c.after)}</Text>
          )}
        </li>
      ))}
      {changes.length > SHOWN_CHANGES && (
        <li><Text span size="xs" c="dimmed">and {changes.length - SHOWN_CHANGES} more field{changes.length - SHOWN_CHANGES === 1 ? '' : 's'}</Text></li>
      )}
    </ul>
  )
}

function actorLabel(event: AuditEvent): string {
  if (!event.actor && !event.actor_email) return 'system'
  return event.actor_email || event.actor || ''
}

/** Audit events, newest first as given: time, actor (staff marked, with the token's prefix and the source address),
 * action (in words over its code), object (by name), what changed and result; with `organizationName`, an
 * Organization column too (the admin portal's whole log); `compact` (one object's events): time, actor, action and
 * result only. Wider than the screen (a narrow window), the table scrolls in its own box, not the page. The table
 * is named `label`; rows carry `testId`. */
export function AuditTable({ events, organizationName, label = 'Audit events', testId = 'audit-event', compact = false }: {
  events: AuditEvent[]
  organizationName?: (id: string | null | undefined) => string
  label?: string
  testId?: string
  compact?: boolean
}) {
  return (
    <Table.ScrollContainer minWidth={compact ? 0 : 960} type="native">
    <Table striped highlightOnHover={!compact} aria-label={label}>
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Time (UTC)</Table.Th>
          <Table.Th>Actor</Table.Th>
          {organizationName && <Table.Th>Organization</Table.Th>}
          <Table.Th>Action</Table.Th>
          {!compact && <Table.Th>Object</Table.Th>}
          {!compact && <Table.Th>Change</Table.Th>}
          <Table.Th>Result</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {events.map((e) => {
          const result = auditResult(e.action)
          const name = compact ? null : auditTargetName(e)
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
                {!compact && (
                  <Text size="xs" c="dimmed" data-testid="audit-source">
                    from {e.source_ip ?? 'no address'}
                  </Text>
                )}
              </Table.Td>
              {organizationName && <Table.Td>{organizationName(e.organization)}</Table.Td>}
              <Table.Td>
                {!compact && <Text size="sm">{actionText(e.action)}</Text>}
                <Code>{e.action}</Code>
              </Table.Td>
              {!compact && (
                <Table.Td data-testid="audit-object">
                  {name && <Text size="sm" fw={600} style={{ wordBreak: 'break-word' }}>{name}</Text>}
                  <Text size={name ? 'xs' : 'sm'} c={name ? 'dimmed' : undefined}>{e.target_type}</Text>
                  <Text size="xs" c="dimmed" style={{ wordBreak: 'break-all' }} title={e.target_id}>
                    {name ? shortId(e.target_id) : e.target_id}
                  </Text>
                </Table.Td>
              )}
              {!compact && (
                <Table.Td miw={180}>
                  <Changes event={e} />
                </Table.Td>
              )}
              <Table.Td miw={84}>
                <Badge variant="filled" color={result === 'done' ? 'teal.9' : 'red.9'}>
                  {result}
                </Badge>
              </Table.Td>
            </Table.Tr>
          )
        })}
      </Table.Tbody>
    </Table>
    </Table.ScrollContainer>
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
