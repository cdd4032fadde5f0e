import { fireEvent, screen, waitFor } from '@testing-library/react'
import { describe, expect, it, vi } from 'vitest'
import type { Organization } from '../api/client'
import { PROJECT, json, problem, renderPage, scope, stubApi } from '../test/render'
import { isOrganizationPath, slugOf } from '../tenancy'
import { NoProject } from './NoProject'

const ORG: Organization = {
  id: PROJECT.organization, slug: 'acme', name: 'Acme', legal_name: '', billing_email: '', currency: 'USD',
  billing_timezone: 'UTC', default_sla_tier: 'standard', plan: 'default', require_2fa: false, role: 'owner',
  can_manage_members: true, created_at: '', updated_at: '',
}
const LONG = { timeout: 5000 }
const noProject = (organization: Organization, selectProject = () => {}) =>
  scope({ organizations: [organization], organization, projects: [], project: null, canWrite: false, selectProject })

describe('no project yet', () => {
  it('derives the slug from the name and knows the organization screens', () => {
    expect(slugOf('  Research Lab #2 ')).toBe('research-lab-2')
    expect(slugOf('Équipe Vision')).toBe('equipe-vision')
    expect(slugOf('!!!')).toBe('')
    expect(slugOf('a'.repeat(62) + ' b')).toBe('a'.repeat(62))
    for (const path of ['/members', '/api-tokens', '/audit-log', '/billing', '/billing/invoices/x'])
      expect(isOrganizationPath(path)).toBe(true)
    for (const path of ['/', '/instances', '/billing-x', '/networking/vpcs/1']) expect(isOrganizationPath(path)).toBe(false)
  })

  it('tells a plain member to ask an owner or admin', () => {
    renderPage(<NoProject />, { value: noProject({ ...ORG, role: 'member', can_manage_members: false }) })
    expect(screen.getByRole('heading', { name: 'No project yet' })).toBeInTheDocument()
    expect(screen.getByText(/Ask an organization owner or admin to invite you/)).toBeInTheDocument()
    expect(screen.queryByRole('textbox', { name: /Project name/ })).not.toBeInTheDocument()
  })

  it('lets an owner create the first project: the API\'s refusal beside the field, then the project is the scope', async () => {
    let attempt = 0
    const requests = stubApi({
      'POST /api/v1/projects/': () => ++attempt === 1
        ? problem(409, 'slug_taken', "Project slug 'research' is taken in this organization.")
        : json({ ...PROJECT, id: 'p-new', name: 'Research lab', slug: 'research-lab', role: 'admin' }, 201),
    })
    const posts = () => requests.filter((r) => r.method === 'POST')
    const selectProject = vi.fn()
    renderPage(<NoProject />, { value: noProject(ORG, selectProject), path: '/billing-not-here', route: '/billing-not-here' })
    expect(screen.getByRole('heading', { name: 'Create your first project' })).toBeInTheDocument()
    expect(screen.getByText(/Acme has no project yet/)).toBeInTheDocument()
    const name = screen.getByRole('textbox', { name: /Project name/ })
    fireEvent.change(name, { target: { value: 'Research' } })
    expect(screen.getByText('Its slug: research')).toBeInTheDocument()
    fireEvent.click(screen.getByRole('button', { name: 'Create project' }))
    // the conflict is about the slug: shown on the name's field, which it is made from
    await waitFor(() => expect(name).toHaveAccessibleDescription(/is taken in this organization/), LONG)
    expect(await posts()[0].json()).toEqual({ organization: ORG.id, name: 'Research', slug: 'research', description: '' })
    expect(posts()[0].headers.get('Idempotency-Key')).toBeTruthy()
    expect(selectProject).not.toHaveBeenCalled()

    fireEvent.change(name, { target: { value: 'Research lab' } })
    fireEvent.click(screen.getByRole('button', { name: 'Create project' }))
    await waitFor(() => expect(selectProject).toHaveBeenCalledWith('p-new'), LONG)
    expect(await posts()[1].json()).toEqual({ organization: ORG.id, name: 'Research lab', slug: 'research-lab', description: '' })
    // the dashboard ('/') shows next
    expect(await screen.findByTestId('elsewhere', {}, LONG)).toBeInTheDocument()
  }, 15_000)

  it('offers an admin the form too', () => {
    renderPage(<NoProject />, { value: noProject({ ...ORG, role: 'admin' }) })
    expect(screen.getByRole('button', { name: 'Create project' })).toBeInTheDocument()
  })
})
