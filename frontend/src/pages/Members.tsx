import { Badge, Group, Paper, Select, SimpleGrid, Stack, Table, Text, TextInput, Title } from '@mantine/core'
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useSubmitOnce } from '../hooks/useSubmitOnce'
import { useState, type FormEvent } from 'react'
import { api, unwrap, type Invitation, type Membership } from '../api/client'
import { useScope } from '../auth/scope'
import { ConfirmButton } from '../components/ConfirmButton'
import { EmptyState } from '../components/EmptyState'
import { Pager } from '../components/Pager'
import { ProblemAlert, fieldError } from '../components/ProblemAlert'
import { WriteButton } from '../components/WriteButton'
import { usePaged } from '../hooks/usePaged'

export const ORG_ROLES = ['owner', 'admin', 'billing', 'member', 'viewer']
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
  const members = usePaged(['memberships', oid], (cursor) =>
    unwrap(api.GET('/api/v1/memberships/', { params: { query: { organization: oid, cursor, page_size: 50 } } })),
  { enabled: Boolean(oid) })
  const invitations = usePaged(['invitations', oid], (cursor) =>
    unwrap(api.GET('/api/v1/invitations/', { params: { query: { organization: oid, cursor, page_size: 50 } } })),
  { enabled: Boolean(oid) })
  const [email, setEmail] = useState('')
  const [chosenWhere, setWhere] = useState<'organization' | 'project' | null>(null)
  // a project admin who does not manage the organization invites to the project
  const where = chosenWhere ?? (!allowed && project?.can_manage_members ? 'project' : 'organization')
  const inviteAllowed = where === 'organization' ? allowed : projectAllowed
  const inviteHint = where === 'organization' ? MANAGE_HINT : PROJECT_MANAGE_HINT
  const [role, setRole] = useState('member')
  const roles = where === 'organization' ? ORG_ROLES : PROJECT_ROLES
  const invite = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/api/v1/invitations/', {
        body: invitationBody(oid, email, role, where === 'project' ? project?.id ?? null : null),
      })),
    onSuccess: () => {
      setEmail('')
      void qc.invalidateQueries({ queryKey: ['invitations'] })
    },
  })
  const changeRole = useMutation({
    mutationFn: ({ id, role }: { id: string; role: string }) =>
      unwrap(api.PATCH('/api/v1/memberships/{id}/', { params: { path: { id } }, body: { role } })),
    onSettled: () => void qc.invalidateQueries({ queryKey: ['memberships'] }),
  })
  const remove = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE('/api/v1/memberships/{id}/', { params: { path: { id } } })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['memberships'] }),
  })
  const revoke = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE('/api/v1/invitations/{id}/', { params: { path: { id } } })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['invitations'] }),
  })
  const submitInvite = useSubmitOnce(invite)
  const submit = (event: FormEvent) => {
    event.preventDefault()
    submitInvite()
  }
  const scopeLabel = (row: Membership | Invitation) =>
    row.project ? `project ${projectName.get(row.project) ?? row.project}` : 'organization'
  const memberRows = members.data?.results ?? []
  const invitationRows = invitations.data?.results ?? []
  const fieldProps = { disabled: !inviteAllowed, title: inviteAllowed ? undefined : inviteHint }

  return (
    <Stack>
      <Title order={2}>Members</Title>
      <Text c="dimmed">
        Who belongs to {organization?.name ?? 'the organization'} and with which role. An organization role applies to
        every project; a project role only to that project. Nobody joins without accepting the e-mailed invitation.
      </Text>
      <Paper withBorder p="md" component="section" aria-labelledby="invite">
        <form onSubmit={submit} noValidate>
          <Stack gap="sm">
            <Title order={3} size="h4" id="invite">
              Invite someone
            </Title>
            <ProblemAlert error={invite.error} title="The invitation was not sent" shownFields={['email', 'role']} />
            <SimpleGrid cols={{ base: 1, sm: 3 }}>
              <TextInput
                label="E-mail"
                type="email"
                required
                value={email}
                onChange={(e) => setEmail(e.currentTarget.value)}
                error={fieldError(invite.error, 'email')}
                {...fieldProps}
              />
              <Select
                label="Member of"
                data={[
                  { value: 'organization', label: `organization ${organization?.name ?? ''}`, disabled: !allowed && projectAllowed },
                  { value: 'project', label: `project ${project?.name ?? ''}` },
                ]}
                value={where}
                onChange={(v) => {
                  if (!v) return
                  setWhere(v as 'organization' | 'project')
                  if (v === 'project' && !PROJECT_ROLES.includes(role)) setRole('member')
                }}
                allowDeselect={false}
                disabled={!allowed && !projectAllowed}
                title={allowed || projectAllowed ? undefined : MANAGE_HINT}
              />
              <Select
                label="Role"
                data={roles}
                value={role}
                onChange={(v) => v && setRole(v)}
                allowDeselect={false}
                error={fieldError(invite.error, 'role')}
                {...fieldProps}
              />
            </SimpleGrid>
            <Group>
              <WriteButton type="submit" loading={invite.isPending} allowed={inviteAllowed} deniedHint={inviteHint}>
                Send invitation
              </WriteButton>
            </Group>
          </Stack>
        </form>
      </Paper>

      <Title order={3} size="h4">
        Members
      </Title>
      <ProblemAlert
        error={members.error ?? changeRole.error ?? remove.error}
        title={changeRole.error ? 'The role was not changed' : remove.error ? 'The member was not removed' : undefined}
      />
      <Table striped highlightOnHover aria-label="Members">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>E-mail</Table.Th>
            <Table.Th>Member of</Table.Th>
            <Table.Th>Role</Table.Th>
            <Table.Th>Since</Table.Th>
            <Table.Th>
              <span className="visually-hidden">Actions</span>
            </Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {memberRows.map((m) => (
            <Table.Tr key={m.id}>
              <Table.Td>
                {m.user_email}{' '}
                {m.user_is_service_account && (
                  <Badge variant="filled" color="gray.7" size="sm">
                    service account
                  </Badge>
                )}
              </Table.Td>
              <Table.Td>{scopeLabel(m)}</Table.Td>
              <Table.Td>
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
              </Table.Td>
              <Table.Td>{new Date(m.created_at).toLocaleDateString()}</Table.Td>
              <Table.Td ta="right">
                <ConfirmButton
                  label="Remove"
                  aria-label={`Remove ${m.user_email} (${scopeLabel(m)})`}
                  title={`Remove ${m.user_email}?`}
                  message="They lose this role at once, and their API tokens that no other membership backs are revoked. The last owner cannot be removed."
                  color="red.9"
                  variant="outline"
                  size="xs"
                  allowed={rowAllowed(m)}
                  deniedHint={m.project ? PROJECT_MANAGE_HINT : MANAGE_HINT}
                  loading={remove.isPending && remove.variables === m.id}
                  onConfirm={() => remove.mutate(m.id)}
                />
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
      <Pager pageNumber={members.pageNumber} hasNext={members.hasNext} hasPrevious={members.hasPrevious}
        onNext={members.goNext} onPrevious={members.goPrevious} loading={members.isFetching} />

      <Title order={3} size="h4">
        Invitations
      </Title>
      <ProblemAlert error={invitations.error ?? revoke.error} title={revoke.error ? 'The invitation was not revoked' : undefined} />
      {invitations.isSuccess && invitationRows.length === 0 && !invitations.hasPrevious ? (
        <EmptyState title="No invitations">
          Invite someone above: they get an e-mail with a link to accept, valid for a few days.
        </EmptyState>
      ) : (
        <Table striped highlightOnHover aria-label="Invitations">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>E-mail</Table.Th>
              <Table.Th>Member of</Table.Th>
              <Table.Th>Role</Table.Th>
              <Table.Th>Status</Table.Th>
              <Table.Th>Expires</Table.Th>
              <Table.Th>
                <span className="visually-hidden">Actions</span>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {invitationRows.map((inv) => (
              <Table.Tr key={inv.id}>
                <Table.Td>{inv.email}</Table.Td>
                <Table.Td>{scopeLabel(inv)}</Table.Td>
                <Table.Td>{inv.role}</Table.Td>
                <Table.Td>
                  <Badge variant="filled" color={statusColor(inv.status)}>
                    {inv.status}
                  </Badge>
                </Table.Td>
                <Table.Td>{new Date(inv.expires_at).toLocaleString()}</Table.Td>
                <Table.Td ta="right">
                  {inv.status === 'pending' && (
                    <ConfirmButton
                      label="Revoke"
                      aria-label={`Revoke the invitation of ${inv.email}`}
                      title={`Revoke the invitation of ${inv.email}?`}
                      message="The e-mailed link stops working. You can invite them again later."
                      color="red.9"
                      variant="outline"
                      size="xs"
                      allowed={rowAllowed(inv)}
                      deniedHint={inv.project ? PROJECT_MANAGE_HINT : MANAGE_HINT}
                      loading={revoke.isPending && revoke.variables === inv.id}
                      onConfirm={() => revoke.mutate(inv.id)}
                    />
                  )}
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
      <Pager pageNumber={invitations.pageNumber} hasNext={invitations.hasNext} hasPrevious={invitations.hasPrevious}
        onNext={invitations.goNext} onPrevious={invitations.goPrevious} loading={invitations.isFetching} />
    </Stack>
  )
}
