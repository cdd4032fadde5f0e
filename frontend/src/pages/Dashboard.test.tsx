import { screen, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { Organization } from '../api/client'
import { PROJECT, json, problem, renderPage, scope, stubApi } from '../test/render'
import { DashboardPage, HEALTH_WINDOW_DAYS } from './Dashboard'

const ORG = { id: PROJECT.organization, name: 'Orbit', role: 'owner' } as Organization
const page = <T,>(results: T[], next: string | null = null) => ({ results, next, previous: null })
const PREVIEW = { organization: ORG.id, period: '2026-12', status: 'draft', currency: 'USD', total: '1234.50', lines: [] }
const EVENT = { event: 'e1', project: PROJECT.id, resource_type: 'instance', resource_id: '0190a3b4-0000-7000-8000-000000000321', kind: 'xid', xid: 79, count: 1, observed_at: '2026-12-03T10:00:00Z', classification: 'gpu_lost', provider_at_fault: true }
const common = {
  'GET /api/v1/instances/': () => json(page([])),
  'GET /api/v1/clusters/': () => json(page([])),
  'GET /api/v1/quotas/': () => json(page([])),
  'GET /api/v1/flavors/': () => json(page([])),
}

describe('dashboard', () => {
  it('shows the month-to-date spend of the organization and the recent health events of the project', async () => {
    const seen = stubApi({
      ...common,
      'GET /api/v1/invoices/preview/': () => json(PREVIEW),
      'GET /api/v1/health-events/': () => json(page([EVENT])),
    })
    renderPage(<DashboardPage />, { value: scope({ organization: ORG }) })
    expect(await screen.findByTestId('stat-spend')).toHaveTextContent('$1,234.50')
    expect(screen.getByRole('link', { name: '$1,234.50' })).toHaveAttribute('href', '/billing')
    const event = await screen.findByTestId('recent-health-event')
    expect(event).toHaveTextContent('GPU lost')
    expect(event).toHaveTextContent('XID 79')
    expect(event).toHaveTextContent('provider fault')
    expect(within(event).getByRole('link', { name: '00000321' })).toHaveAttribute('href', `/health-events?instance=${EVENT.resource_id}`)
    const ask = new URL(seen.find((r) => r.url.includes('/health-events/'))!.url).searchParams
    expect(ask.get('project')).toBe(PROJECT.id)
    const since = Date.parse(ask.get('observed_after')!)
    expect(Math.abs(Date.now() - HEALTH_WINDOW_DAYS * 86_400_000 - since)).toBeLessThan(60_000)
  })

  it('names the SLA credits on this month\'s invoice beside its total, with the charges', async () => {
    stubApi({
      ...common,
      'GET /api/v1/invoices/preview/': () => json({ ...PREVIEW, subtotal: '100.00', credits: '-183.02', total: '-83.02' }),
      'GET /api/v1/health-events/': () => json(page([])),
    })
    renderPage(<DashboardPage />, { value: scope({ organization: ORG }) })
    expect(await screen.findByTestId('spend-credits')).toHaveTextContent('Charges $100.00, less $183.02 of SLA credits on this invoice')
  })

  it('names no credits when the invoice has none', async () => {
    stubApi({
      ...common,
      'GET /api/v1/invoices/preview/': () => json({ ...PREVIEW, subtotal: '1234.50', credits: '0.00' }),
      'GET /api/v1/health-events/': () => json(page([])),
    })
    renderPage(<DashboardPage />, { value: scope({ organization: ORG }) })
    expect(await screen.findByTestId('stat-spend')).toHaveTextContent('$1,234.50')
    expect(screen.queryByTestId('spend-credits')).toBeNull()
  })

  it('says why the spend is not shown to a role that does not read the bills, and when nothing failed', async () => {
    stubApi({
      ...common,
      'GET /api/v1/invoices/preview/': () => problem(400, 'invalid', 'Invalid input.', { organization: ['Not found.'] }),
      'GET /api/v1/health-events/': () => json(page([])),
    })
    renderPage(<DashboardPage />, { value: scope({ organization: { ...ORG, role: 'member' } }) })
    expect(await screen.findByTestId('spend-not-available')).toHaveTextContent('Only owners, admins and billing members')
    expect(await screen.findByTestId('health-none')).toHaveTextContent('No faults were seen')
    expect(screen.queryByRole('alert')).toBeNull()
  })
})
