import { fireEvent, screen, waitFor, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { Organization } from '../../api/client'
import { json, problem, renderPage, stubApi } from '../../test/render'
import { AdminTenantsPage, matchOrganizations, quotaUseText } from './Tenants'

const org = (id: string, slug: string, name: string) =>
  ({ id, slug, name, legal_name: '', billing_email: '', currency: 'EUR', billing_timezone: 'UTC', default_sla_tier: 'standard',
     plan: 'pro', require_2fa: false, role: null, can_manage_members: true, created_at: '', updated_at: '' }) as unknown as Organization
const ORGS = [org('o1', 'delta', 'Delta Labs'), org('o2', 'keel', 'Keel AI')]
const page = <T,>(results: T[]) => ({ count: results.length, next: null, previous: null, results })

describe('tenants', () => {
  it('finds organizations by name or slug and says a quota\'s use beside its limit', () => {
    expect(matchOrganizations(ORGS, 'KEEL').map((o) => o.slug)).toEqual(['keel'])
    expect(matchOrganizations(ORGS, ' labs').map((o) => o.slug)).toEqual(['delta'])
    expect(matchOrganizations(ORGS, '')).toHaveLength(2)
    expect(quotaUseText({ usage: 12, limit: 64 })).toBe('12 of 64 (19 %)')
    expect(quotaUseText({ usage: null, limit: 64 })).toBe('not counted')
  })

  it('changes a quota: the server\'s refusal on the field, then the new limit', async () => {
    let limit = 32
    const quota = () => ({ id: 'q1', organization: 'o1', project: null, scope: 'organization', resource: 'gpus', limit, usage: 8,
      warnings: [], updated_at: '' })
    const seen = stubApi({
      'GET /api/v1/me/': () => json({ email: 'ops@provider.example', staff_role: 'operator' }),
      'GET /api/v1/organizations/': () => json(page(ORGS)),
      'GET /api/v1/projects/': () => json(page([])),
      'GET /api/v1/quotas/': () => json(page([quota()])),
      'PATCH /api/v1/quotas/q1/': async (r) => {
        const body = await r.json()
        if (body.limit < 0) return problem(400, 'validation_failed', 'Invalid input.', { limit: ['Ensure this value is greater than or equal to 0.'] })
        limit = body.limit
        return json(quota())
      },
    })
    renderPage(<AdminTenantsPage />)
    fireEvent.click(await screen.findByRole('button', { name: 'Delta Labs' }))
    const panel = await screen.findByTestId('tenant-panel')
    expect(await within(panel).findByTestId('quota-use')).toHaveTextContent('8 of 32 (25 %)')
    fireEvent.click(within(panel).getByRole('button', { name: 'Change the gpus quota of Delta Labs' }))
    const dialog = await screen.findByRole('dialog', { name: 'gpus quota of Delta Labs' })
    const field = within(dialog).getByLabelText(/^Limit/)
    fireEvent.change(field, { target: { value: '-1' } })
    fireEvent.click(within(dialog).getByRole('button', { name: 'Save limit' }))
    expect(await within(dialog).findByText('Ensure this value is greater than or equal to 0.')).toBeInTheDocument()
    expect(field).toHaveAttribute('aria-invalid', 'true')
    fireEvent.change(field, { target: { value: '64' } })
    fireEvent.click(within(dialog).getByRole('button', { name: 'Save limit' }))
    await waitFor(() => expect(within(panel).getByTestId('quota-use')).toHaveTextContent('8 of 64 (13 %)'))
    const patches = seen.filter((r) => r.method === 'PATCH')
    expect(await patches[1].json()).toEqual({ limit: 64 })
  }, 20_000)

  it('is not found for a tenant, who never gets the organizations asked for', async () => {
    const seen = stubApi({ 'GET /api/v1/me/': () => json({ email: 'owner@keel.example', staff_role: '' }) })
    renderPage(<AdminTenantsPage />)
    expect(await screen.findByText('Not found')).toBeInTheDocument()
    expect(seen.some((r) => r.url.includes('/organizations/'))).toBe(false)
  })
})
