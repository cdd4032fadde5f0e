import { Button, Group, Paper, Select, SimpleGrid, Stack, Text, TextInput, Title } from '@mantine/core'
import { useState, type FormEvent } from 'react'
import { ApiError, api, unwrap } from '../../api/client'
import { useMe } from '../../auth/staff'
import { EmptyState } from '../../components/EmptyState'
import { Pager } from '../../components/Pager'
import { ProblemAlert, fieldError } from '../../components/ProblemAlert'
import { usePaged } from '../../hooks/usePaged'
import { AuditTable } from '../Audit'
import { NotFoundPage } from '../NotFound'
import { useOrgNames, useStaffOrganizations } from './organizations'

export interface StaffAuditFilters {
  actor: string
  /** '' any actor, 'true' provider staff, 'false' tenants' users, tokens and the system */
  staff: string
  organization: string
  action: string
  targetType: string
  targetId: string
  after: string
  before: string
}

export const NO_STAFF_FILTERS: StaffAuditFilters = {
  actor: '', staff: '', organization: '', action: '', targetType: '', targetId: '', after: '', before: '',
}

/** The `/audit-events/` query of the whole log for the filters: only those given; the times (a `datetime-local`
 * value, read as UTC) as ISO 8601. */
export function staffAuditQuery(f: StaffAuditFilters) {
  const iso = (local: string) => new Date(`${local}Z`).toISOString()
  const text = (v: string) => v.trim()
  return {
    ...(text(f.actor) ? { actor: text(f.actor) } : {}),
    ...(f.staff ? { actor_is_staff: f.staff === 'true' } : {}),
    ...(f.organization ? { organization: f.organization } : {}),
    ...(text(f.action) ? { action: text(f.action) } : {}),
    ...(text(f.targetType) ? { target_type: text(f.targetType) } : {}),
    ...(text(f.targetId) ? { target_id: text(f.targetId) } : {}),
    ...(f.after ? { created_after: iso(f.after) } : {}),
    ...(f.before ? { created_before: iso(f.before) } : {}),
  }
}

const FIELDS = ['actor', 'actor_is_staff', 'organization', 'action', 'target_type', 'target_id', 'created_after',
  'created_before']

/** The provider's whole audit log (`/audit-events/`, staff see every organization's events and their own), newest
 * first, server-paged; filters: actor (e-mail or id), staff or tenants, organization, action (exact or a prefix
 * ending in '.'), target (type or an app's prefix, id) and a UTC time range. Anyone else: Not found. */
export function AdminAuditPage() {
  const me = useMe()
  const staff = Boolean(me.data?.staff_role)
  const orgs = useStaffOrganizations(staff)
  const orgName = useOrgNames(staff)
  const [draft, setDraft] = useState<StaffAuditFilters>(NO_STAFF_FILTERS)
  const [filters, setFilters] = useState<StaffAuditFilters>(NO_STAFF_FILTERS)
  const events = usePaged(['staff-audit-events', filters], (cursor) =>
    unwrap(api.GET('/api/v1/audit-events/', {
      params: { query: { ...staffAuditQuery(filters), cursor, page_size: 50 } },
    })),
  { enabled: staff })
  if (me.isPending) return null
  if (!staff || (orgs.error instanceof ApiError && orgs.error.status === 404)) return <NotFoundPage />

  const apply = (next: StaffAuditFilters) => {
    events.reset()
    setFilters(next)
  }
  const submit = (event: FormEvent) => {
    event.preventDefault()
    apply(draft)
  }
  const set = (key: keyof StaffAuditFilters) => (e: { currentTarget: HTMLInputElement }) =>
    setDraft({ ...draft, [key]: e.currentTarget.value })
  const rows = events.data?.results ?? []
  const filtered = Object.values(filters).some(Boolean)
  const orgOptions = (orgs.data?.results ?? []).map((o) => ({ value: o.id, label: `${o.name} (${o.slug})` }))

  return (
    <Stack>
      <Title order={2}>Audit log</Title>
      <Text c="dimmed">
        Every change in every organization and on the fleet, by tenants, staff and the system, every change refused
        for lack of permission (<code>api.request.refused</code>) and every failed sign-in: who (and with which
        token), what, to which object, when and from where. Newest first; it cannot be edited.
      </Text>
      <Paper withBorder p="md" component="section" aria-labelledby="staff-audit-filters">
        <form onSubmit={submit} noValidate>
          <Stack gap="sm">
            <Title order={3} size="h4" id="staff-audit-filters">
              Filter
            </Title>
            <SimpleGrid cols={{ base: 1, sm: 2, lg: 4 }}>
              <TextInput label="Actor" description="E-mail or user id" value={draft.actor} onChange={set('actor')}
                error={fieldError(events.error, 'actor')} />
              <Select label="Actor kind" description="Provider staff or tenants" value={draft.staff}
                data={[{ value: '', label: 'Anyone' }, { value: 'true', label: 'Provider staff' },
                  { value: 'false', label: 'Tenants and the system' }]}
                onChange={(v) => setDraft({ ...draft, staff: v ?? '' })} allowDeselect={false}
                error={fieldError(events.error, 'actor_is_staff')} />
              <Select label="Organization" description="Events of one organization" value={draft.organization || null}
                data={orgOptions} searchable clearable placeholder="Any organization"
                onChange={(v) => setDraft({ ...draft, organization: v ?? '' })}
                error={fieldError(events.error, 'organization')} />
              <TextInput label="Action" description="Exact, or a prefix ending in “.” (host.)" value={draft.action}
                onChange={set('action')} error={fieldError(events.error, 'action')} />
              <TextInput label="Object type" description="app.model (inventory.host), or an app (inventory.)"
                value={draft.targetType} onChange={set('targetType')} error={fieldError(events.error, 'target_type')} />
              <TextInput label="Object id" description="The object's id" value={draft.targetId}
                onChange={set('targetId')} error={fieldError(events.error, 'target_id')} />
              <TextInput label="From (UTC)" type="datetime-local" value={draft.after} onChange={set('after')}
                error={fieldError(events.error, 'created_after')} />
              <TextInput label="Before (UTC)" type="datetime-local" value={draft.before} onChange={set('before')}
                error={fieldError(events.error, 'created_before')} />
            </SimpleGrid>
            <Group>
              <Button type="submit">Apply filters</Button>
              <Button variant="default" disabled={!filtered && !Object.values(draft).some(Boolean)}
                onClick={() => {
                  setDraft(NO_STAFF_FILTERS)
                  apply(NO_STAFF_FILTERS)
                }}>
                Clear
              </Button>
            </Group>
          </Stack>
        </form>
      </Paper>
      <ProblemAlert error={events.error} title="The audit log could not be read" shownFields={FIELDS} />
      {events.isSuccess && rows.length === 0 && !events.hasPrevious ? (
        <EmptyState title={filtered ? 'No events match' : 'No events yet'}>
          {filtered ? 'Widen the time range or clear the filters.' : 'Changes appear here as they are made.'}
        </EmptyState>
      ) : (
        <AuditTable events={rows} organizationName={orgName} />
      )}
      <Pager pageNumber={events.pageNumber} hasNext={events.hasNext} hasPrevious={events.hasPrevious}
        onNext={events.goNext} onPrevious={events.goPrevious} loading={events.isFetching} />
    </Stack>
  )
}
