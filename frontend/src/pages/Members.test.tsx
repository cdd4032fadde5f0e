import { fireEvent, screen, waitFor } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { Organization } from '../api/client'
import { PROJECT, json, renderPage, scope, stubApi } from '../test/render'
import { MembersPage, invitationBody, rowManageable } from './Members'

const ORG: Organization = {
  id: PROJECT.organization, slug: 'acme', name: 'Acme', legal_name: '', billing_email: '', currency: 'USD',
  billing_timezone: 'UTC', default_sla_tier: 'standard', plan: 'default', require_2fa: false, role: 'owner',
  can_manage_members: true, created_at: '', updated_at: '',
}
const MEMBER = { id: 'm1', organization: ORG.id, project: null, scope: 'organization', user: 'u1', user_email: 'dev@acme.test', user_is_service_account: false, role: 'member', created_at: '2026-12-01T00:00:00Z' }
const INVITE = { id: 'i1', organization: ORG.id, project: null, email: 'new@acme.test', role: 'viewer', status: 'pending', invited_by: 'u0', expires_at: '2026-12-08T00:00:00Z', accepted_at: null, revoked_at: null, created_at: '2026-12-01T00:00:00Z' }
const page = <T,>(results: T[]) => ({ results, next: null, previous: null })
const LONG = { timeout: 5000 }

describe('members', () => {
  it('builds an invitation for the organization or for the project', () => {
    expect(invitationBody('o', 'a@b.c', 'admin', null)).toEqual({ organization: 'o', email: 'a@b.c', role: 'admin' })
    expect(invitationBody('o', 'a@b.c', 'viewer', 'p')).toEqual({ organization: 'o', email: 'a@b.c', role: 'viewer', project: 'p' })
  })

  it('invites by e-mail and lists members and pending invitations for an owner', async () => {
    const seen = stubApi({
      'GET /api/v1/memberships/': () => json(page([MEMBER])),
      'GET /api/v1/invitations/': () => json(page([INVITE])),
      'POST /api/v1/invitations/': () => json(INVITE, 201),
    })
    renderPage(<MembersPage />, { value: scope({ organization: ORG, organizations: [ORG] }) })
    expect(await screen.findByRole('button', { name: 'Revoke the invitation of new@acme.test' }, LONG)).toBeEnabled()
    expect(await screen.findByRole('button', { name: 'Remove dev@acme.test (organization)' }, LONG)).toBeEnabled()
    fireEvent.change(screen.getByLabelText(/^E-mail/), { target: { value: 'new@acme.test' } })
    fireEvent.click(screen.getByRole('button', { name: 'Send invitation' }))
    await waitFor(() => expect(seen.some((r) => r.method === 'POST')).toBe(true), LONG)
    expect(await seen.find((r) => r.method === 'POST')!.json()).toEqual({ organization: ORG.id, email: 'new@acme.test', role: 'member' })
    // the sender is told it went and what happens next; the focus is back on the e-mail field for the next one
    expect(await screen.findByTestId('create-notice', {}, LONG)).toHaveTextContent('Invitation sent to new@acme.test')
    await waitFor(() => expect(screen.getByLabelText(/^E-mail/)).toHaveFocus(), LONG)
    expect(screen.getByRole('combobox', { name: 'Role of dev@acme.test (organization)' })).toBeEnabled()
  }, 15_000)

  it('shows every member action disabled when the server says the caller may not manage members', async () => {
    stubApi({
      'GET /api/v1/memberships/': () => json(page([MEMBER])),
      'GET /api/v1/invitations/': () => json(page([INVITE])),
    })
    const viewer = { ...ORG, role: 'viewer', can_manage_members: false }
    renderPage(<MembersPage />, { value: scope({ organization: viewer, organizations: [viewer] }) })
    expect(await screen.findByRole('button', { name: 'Revoke the invitation of new@acme.test' }, LONG)).toBeDisabled()
    expect(screen.getByRole('button', { name: 'Remove dev@acme.test (organization)' })).toBeDisabled()
    expect(screen.getByRole('button', { name: 'Send invitation' })).toBeDisabled()
    expect(screen.getByRole('combobox', { name: 'Role of dev@acme.test (organization)' })).toBeDisabled()
  })

  it('lets a project admin manage the project\'s members and invitations but not the organization\'s', async () => {
    const PROJECT_MEMBER = { ...MEMBER, id: 'm2', project: PROJECT.id, scope: 'project', user_email: 'intern@acme.test' }
    const PROJECT_INVITE = { ...INVITE, id: 'i2', project: PROJECT.id, email: 'guest@acme.test' }
    const seen = stubApi({
      'GET /api/v1/memberships/': () => json(page([MEMBER, PROJECT_MEMBER])),
      'GET /api/v1/invitations/': () => json(page([PROJECT_INVITE])),
      'POST /api/v1/invitations/': () => json(PROJECT_INVITE, 201),
    })
    const outsider = { ...ORG, role: null, can_manage_members: false }
    const adminOfProject = { ...PROJECT, role: 'admin', can_manage_members: true }
    renderPage(<MembersPage />, {
      value: scope({ organization: outsider, organizations: [outsider], project: adminOfProject, projects: [adminOfProject] }),
    })
    expect(await screen.findByRole('button', { name: 'Remove intern@acme.test (project Research)' }, LONG)).toBeEnabled()
    expect(screen.getByRole('combobox', { name: 'Role of intern@acme.test (project Research)' })).toBeEnabled()
    expect(screen.getByRole('button', { name: 'Remove dev@acme.test (organization)' })).toBeDisabled()
    expect(screen.getByRole('combobox', { name: 'Role of dev@acme.test (organization)' })).toBeDisabled()
    expect(await screen.findByRole('button', { name: 'Revoke the invitation of guest@acme.test' }, LONG)).toBeEnabled()
    fireEvent.change(screen.getByLabelText(/^E-mail/), { target: { value: 'guest@acme.test' } })
    expect(screen.getByRole('button', { name: 'Send invitation' })).toBeEnabled()
    fireEvent.click(screen.getByRole('button', { name: 'Send invitation' }))
    await waitFor(() => expect(seen.some((r) => r.method === 'POST')).toBe(true), LONG)
    expect(await seen.find((r) => r.method === 'POST')!.json()).toEqual({
      organization: ORG.id, email: 'guest@acme.test', role: 'member', project: PROJECT.id,
    })
  }, 15_000)

  it('decides each row from the organization or that project\'s answer', () => {
    const projects = [{ id: 'p1', can_manage_members: true }, { id: 'p2', can_manage_members: false }]
    expect(rowManageable({ project: null }, false, projects)).toBe(false)
    expect(rowManageable({ project: 'p1' }, false, projects)).toBe(true)
    expect(rowManageable({ project: 'p2' }, false, projects)).toBe(false)
    expect(rowManageable({ project: 'p2' }, true, projects)).toBe(true)
  })
})
