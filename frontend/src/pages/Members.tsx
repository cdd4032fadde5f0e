import { Badge, Select, SimpleGrid, Stack, Text, TextInput, Title } from '@mantine/core'
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { api, unwrap, type Invitation, type Membership } from '../api/client'
import { useScope } from '../auth/scope'
import { CreateForm } from '../components/CreateForm'
import { DeleteButton } from '../components/DeleteButton'
import { ChoiceFilter, FilterBar } from '../components/ListFilters'
import { ProblemAlert } from '../components/ProblemAlert'
import { ResourceTable } from '../components/ResourceTable'
import { useCreateForm } from '../hooks/useCreateForm'
import { useListFilters } from '../hooks/useListFilters'
import { usePaged } from '../hooks/usePaged'
import { useRemove } from '../hooks/useRemove'

type OrgRole = 'owner' | 'admin' | 'billing' | 'member' | 'viewer'
export const ORG_ROLES: OrgRole[] = ['owner', 'admin', 'billing', 'member', 'viewer']
export const PROJECT_ROLES = ['admin', 'member', 'viewer']
export const MANAGE_HINT = 'Only the organization’s owners and admins manage its members.'
export const PROJECT_MANAGE_HINT = 'Only the organization’s owners and admins, and the project’s admins, manage a project’s members.'

/** Whether the caller may change `row` (a membership or invitation): an organization row from the organization's
 * `can_manage_members`, a project row from that project's `can_manage_members` (the server's answers; a
 * project's admins manage its members without managing the organization's). */
export function rowManageable(row: { project?: string | null }, orgAllowed: boolean, projects: { id: string; can_manage_members: boolean }[]): boolean {
  if (!row.project) return orgAllowed
  return orgAllowed || Boolean(projects.find((p) => p.id === row.project)?.can_manage_members)
}

/** The `POST /invitations/` body: an organization role, or a project role when `project` is given. */
export function invitationBody(organization: string, email: string, role: string, project: string | null) {
  return { organization, email, role, ...(project ? { project } : {}) }
}

function statusColor(status: string): string {
  return status === 'pending' ? 'blue.8' : status === 'accepted' ? 'teal.9' : 'gray.7'
}

/** The organization's members (`/memberships/?organization=`, organization and project roles) and invitations:
 * invite by e-mail with a role, change a role, remove a member, revoke a pending invitation. Enabled from the
 * organization's `can_manage_members`, and for a project's rows and invitations also from that project's
 * `can_manage_members` (the server's answers: a project admin manages the project's members). */
export function MembersPage() {
  const { organization, project, projects } = useScope()
  const qc = useQueryClient()
  const oid = organization?.id ?? ''
  const allowed = Boolean(organization?.can_manage_members)
  const projectAllowed = allowed || Boolean(project?.can_manage_members)
  const rowAllowed = (row: { project?: string | null }) => rowManageable(row, allowed, projects)
  const rowProps = (row: { project?: string | null }) => {
    const ok = rowAllowed(row)
    return { disabled: !ok, title: ok ? undefined : row.project ? PROJECT_MANAGE_HINT : MANAGE_HINT }
  }
  const projectName = new Map(projects.map((p) => [p.id, p.name]))
  const filters = useListFilters({ scope: null as 'organization' | 'project' | null, role: null as OrgRole | null })
  const members = usePaged(['memberships', oid, filters.query], (cursor) =>
    unwrap(api.GET('/api/v1/memberships/', {
      params: { query: { organization: oid, ...filters.query, cursor, page_size: 50 } },
    })),
  { enabled: Boolean(oid) })
  const invitations = usePaged(['invitations', oid], (cursor) =>
    unwrap(api.GET('/api/v1/invitations/', { params: { query: { organization: oid, cursor, page_size: 50 } } })),
  { enabled: Boolean(oid) })
  const [chosenWhere, setWhere] = useState<'organization' | 'project' | null>(null)
  const [sent, setSent] = useState<Invitation | null>(null)
  // a project admin who does not manage the organization invites to the project
  const where = chosenWhere ?? (!allowed && project?.can_manage_members ? 'project' : 'organization')
  const inviteAllowed = where === 'organization' ? allowed : projectAllowed
  const inviteHint = where === 'organization' ? MANAGE_HINT : PROJECT_MANAGE_HINT
  const invite = useCreateForm({ email: '', role: 'member' }, {
    mutationFn: (v) =>
      unwrap(api.POST('/api/v1/invitations/', {
        body: invitationBody(oid, v.email, v.role, where === 'project' ? project?.id ?? null : null),
      })),
    invalidate: ['invitations'],
    clear: ['email'],
    onSuccess: (sent) => setSent(sent as Invitation),
  })
  const role = invite.values.role
  const roles = where === 'organization' ? ORG_ROLES : PROJECT_ROLES
  const changeRole = useMutation({
    mutationFn: ({ id, role }: { id: string; role: string }) =>
      unwrap(api.PATCH('/api/v1/memberships/{id}/', { params: { path: { id } }, body: { role } })),
    onSettled: () => void qc.invalidateQueries({ queryKey: ['memberships'] }),
  })
  const remove = useRemove((id: string) => unwrap(api.DELETE('/api/v1/memberships/{id}/', { params: { path: { id } } })), ['memberships'])
  const revoke = useRemove((id: string) => unwrap(api.DELETE('/api/v1/invitations/{id}/', { params: { path: { id } } })), ['invitations'])
  const scopeLabel = (row: Membership | Invitation) =>
    row.project ? `project ${projectName.get(row.project) ?? row.project}` : 'organization'
  const invitationRows = invitations.data?.results ?? []
  const fieldProps = { disabled: !inviteAllowed, title: inviteAllowed ? undefined : inviteHint }

  return (
    <Stack>
      <Title order={2}>Members</Title>
      <Text c="dimmed">
        Who belongs to {organization?.name ?? 'the organization'} and with which role. An organization role applies to
        every project; a project role only to that project. Nobody joins without accepting the e-mailed invitation.
      </Text>
      <CreateForm id="invite" title="Invite someone" error={invite.error} errorTitle="The invitation was not sent"
        fields={['email', 'role']} onSubmit={invite.submit} submitLabel="Send invitation" loading={invite.mutation.isPending}
        allowed={inviteAllowed} deniedHint={inviteHint}
        notice={sent && `Invitation sent to ${sent.email}: they join once they accept the e-mailed link (valid until ${new Date(sent.expires_at).toUTCString()}). It is listed under Invitations below until then.`}>
        <SimpleGrid cols={{ base: 1, sm: 3 }}>
          <TextInput label="E-mail" type="email" required {...invite.text('email')} {...fieldProps} />
          <Select
            label="Member of"
            data={[
              { value: 'organization', label: `organization ${organization?.name ?? ''}`, disabled: !allowed && projectAllowed },
              { value: 'project', label: project ? `project ${project.name}` : 'a project (none yet)', disabled: !project },
            ]}
            value={where}
            onChange={(v) => {
              if (!v) return
              setWhere(v as 'organization' | 'project')
              if (v === 'project' && !PROJECT_ROLES.includes(role)) invite.set('role', 'member')
            }}
            allowDeselect={false}
            disabled={!allowed && !projectAllowed}
            title={allowed || projectAllowed ? undefined : MANAGE_HINT}
          />
          <Select label="Role" data={roles} value={role} onChange={(v) => v && invite.set('role', v)} allowDeselect={false}
            error={invite.errorOf('role')} {...fieldProps} />
        </SimpleGrid>
      </CreateForm>

      <Title order={3} size="h4">
        Members
      </Title>
      <ProblemAlert
        error={members.error ?? changeRole.error ?? remove.error}
        title={changeRole.error ? 'The role was not changed' : remove.error ? 'The member was not removed' : undefined}
      />
      <FilterBar label="Filter members">
        <ChoiceFilter filters={filters} param="scope" label="Filter by membership" placeholder="Organization and projects"
          w={230} data={[{ value: 'organization', label: 'organization roles' }, { value: 'project', label: 'project roles' }]} />
        <ChoiceFilter filters={filters} param="role" label="Filter by role" placeholder="Any role" data={ORG_ROLES} />
      </FilterBar>
      <ResourceTable
        label="Members"
        rows={members.data?.results ?? []}
        rowKey={(m) => m.id}
        list={members}
        filters={filters}
        empty={{ title: 'No members', text: 'Invite someone above.' }}
        columns={[
          {
            header: 'E-mail',
            cell: (m) => (
              <>
                {m.user_email}{' '}
                {m.user_is_service_account && (
                  <Badge variant="filled" color="gray.7" size="sm">
                    service account
                  </Badge>
                )}
              </>
            ),
          },
          { header: 'Member of', cell: (m) => scopeLabel(m) },
          {
            header: 'Role',
            cell: (m) => (
              <Select
                aria-label={`Role of ${m.user_email} (${scopeLabel(m)})`}
                size="xs"
                w={130}
                data={m.project ? PROJECT_ROLES : ORG_ROLES}
                value={changeRole.isPending && changeRole.variables?.id === m.id ? changeRole.variables.role : m.role}
                onChange={(v) => v && v !== m.role && changeRole.mutate({ id: m.id, role: v })}
                allowDeselect={false}
                {...rowProps(m)}
              />
            ),
          },
          { header: 'Since', cell: (m) => new Date(m.created_at).toLocaleDateString() },
        ]}
        actions={(m) => (
          <DeleteButton remove={remove} target={m.id} label="Remove" name={`Remove ${m.user_email} (${scopeLabel(m)})`}
            title={`Remove ${m.user_email}?`}
            message="They lose this role at once, and their API tokens that no other membership backs are revoked. The last owner cannot be removed."
            allowed={rowAllowed(m)} deniedHint={m.project ? PROJECT_MANAGE_HINT : MANAGE_HINT} />
        )}
      />

      <Title order={3} size="h4">
        Invitations
      </Title>
      <ProblemAlert error={invitations.error ?? revoke.error} title={revoke.error ? 'The invitation was not revoked' : undefined} />
      <ResourceTable
        label="Invitations"
        rows={invitationRows}
        rowKey={(inv) => inv.id}
        list={invitations}
        empty={{ title: 'No invitations', text: 'Invite someone above: they get an e-mail with a link to accept, valid for a few days.' }}
        columns={[
          { header: 'E-mail', cell: (inv) => inv.email },
          { header: 'Member of', cell: (inv) => scopeLabel(inv) },
          { header: 'Role', cell: (inv) => inv.role },
          { header: 'Status', cell: (inv) => <Badge variant="filled" color={statusColor(inv.status)}>{inv.status}</Badge> },
          { header: 'Expires', cell: (inv) => new Date(inv.expires_at).toLocaleString() },
        ]}
        actions={(inv) => inv.status === 'pending' && (
          <DeleteButton remove={revoke} target={inv.id} label="Revoke" name={`Revoke the invitation of ${inv.email}`}
            title={`Revoke the invitation of ${inv.email}?`}
            message="The e-mailed link stops working. You can invite them again later."
            allowed={rowAllowed(inv)} deniedHint={inv.project ? PROJECT_MANAGE_HINT : MANAGE_HINT} />
        )}
      />
    </Stack>
  )
}
