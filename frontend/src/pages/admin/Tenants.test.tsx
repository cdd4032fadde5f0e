import { fireEvent, screen, waitFor, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { Organization } from '../../api/client'
import { json, problem, renderPage, stubApi } from '../../test/render'
import { AdminTenantsPage, matchOrganizations, quotaUseText, slaStanding, spendText } from './Tenants'

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
      warnings: [], allowed_actions: ['update', 'delete'], updated_at: '' })
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
    expect(within(panel).queryByTestId('quota-read-only')).toBeNull()     // an operator changes them
    fireEvent.click(within(panel).getByRole('button', { name: 'Change the GPUs quota of Delta Labs' }))
    const dialog = await screen.findByRole('dialog', { name: 'GPUs quota of Delta Labs' })
    const field = within(dialog).getByLabelText(/^Limit/)
    fireEvent.change(field, { target: { value: '1.5' } })      // kept as typed, refused before sending
    fireEvent.click(within(dialog).getByRole('button', { name: 'Save limit' }))
    expect(await within(dialog).findByText('A limit is a whole number (1.5 is not).')).toBeInTheDocument()
    expect(seen.filter((r) => r.method === 'PATCH')).toHaveLength(0)
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

  it('offers support staff no quota change: the server gives them no allowed action', async () => {
    stubApi({
      'GET /api/v1/me/': () => json({ email: 'support@provider.example', staff_role: 'support' }),
      'GET /api/v1/organizations/': () => json(page(ORGS)),
      'GET /api/v1/projects/': () => json(page([])),
      'GET /api/v1/quotas/': () => json(page([{ id: 'q1', organization: 'o1', project: null, scope: 'organization',
        resource: 'gpus', limit: 32, usage: 8, warnings: [], allowed_actions: [], updated_at: '' }])),
    })
    renderPage(<AdminTenantsPage />)
    fireEvent.click(await screen.findByRole('button', { name: 'Delta Labs' }))
    const panel = await screen.findByTestId('tenant-panel')
    const change = await within(panel).findByRole('button', { name: 'Change the GPUs quota of Delta Labs' })
    expect(change).toBeDisabled()
    expect(change).toHaveAttribute('title', 'Only operators change quotas; your staff role reads them.')
    expect(within(panel).getByRole('button', { name: 'Add quota' })).toBeDisabled()
    // said on the screen too, not only on hovering a greyed-out button
    expect(within(panel).getByTestId('quota-read-only')).toHaveTextContent('Only operators change quotas; your staff role reads them.')
  })

  it('shows the organization\'s month: spend to date, SLA standing and the open incidents that hit it', async () => {
    const line = (id: string, seconds: number) => ({ id, kind: 'usage', project: 'p', resource_type: 'instance', resource_id: id, sku: 's',
      pricing_model: 'on_demand', sla_tier: 'standard', gpu_model: 'H100', description: id, billed_seconds: seconds, quantity: '1',
      unit: 'hour', unit_price: '1', amount: '1', tax_amount: '0' })
    const report = { id: 'r1', organization: 'o1', project: 'p', resource_type: 'instance', resource_id: 'vm1', sla_tier: 'standard',
      period: '2026-11', held_minutes: '43200', downtime_minutes: '540', uptime_pct: '98.75', target_uptime_pct: '99.0000',
      credit_pct: '10', billed_amount: '100.00', credit_amount: '10.00', currency: 'EUR', source_invoice: 'i', applied_invoice: null }
    stubApi({
      'GET /api/v1/me/': () => json({ email: 'support@provider.example', staff_role: 'support' }),
      'GET /api/v1/organizations/': () => json(page(ORGS)),
      'GET /api/v1/projects/': () => json(page([])),
      'GET /api/v1/quotas/': () => json(page([])),
      'GET /api/v1/invoices/preview/': () => json({ organization: 'o1', period: '2026-12', currency: 'EUR', total: '1234.5', status: 'draft',
        lines: [line('vm1', 7200), line('vm2', 3600), line('vm1', 1800)] }),
      'GET /api/v1/sla-reports/': () => json(page([report])),
      'GET /api/v1/incidents/': () => json(page([{ id: 'i1', host: 'a-su1-n01', gpu: null, gpu_index: null, start: '2026-12-04T03:00:00Z',
        end: null, duration_s: null, reason: 'PSU failed', provider_at_fault: true },
      { id: 'i2', host: 'b-n02', gpu: null, gpu_index: null, start: '2026-12-04T03:00:00Z', end: null, duration_s: null, reason: 'other',
        provider_at_fault: true }])),
      'GET /api/v1/incidents/i1/impact/': () => json({ incident: 'i1', open: true, counts_for_sla: true, downtime_s: 7200, credits: [],
        resources: [{ resource_type: 'instance', resource_id: 'vm1', partial: false, organization: 'o1', organization_name: 'Delta Labs',
          project: 'p', downtime_s: 7200, credits: [] }] }),
      'GET /api/v1/incidents/i2/impact/': () => json({ incident: 'i2', open: true, counts_for_sla: true, downtime_s: 60, credits: [],
        resources: [{ resource_type: 'instance', resource_id: 'k1', partial: false, organization: 'o2', organization_name: 'Keel AI',
          project: 'q', downtime_s: 60, credits: [] }] }),
    })
    renderPage(<AdminTenantsPage />)
    fireEvent.click(await screen.findByRole('button', { name: 'Delta Labs' }, { timeout: 5000 }))
    const panel = await screen.findByTestId('tenant-panel')
    await waitFor(() => expect(within(panel).getByTestId('tenant-spend')).toHaveTextContent('€1,234.50 to date, 2 resources billed for 3.5 h'))
    expect(within(panel).getByTestId('tenant-sla')).toHaveTextContent('missed')
    expect(within(panel).getByTestId('tenant-sla')).toHaveTextContent('lowest uptime 98.750 % in 2026-11 (target 99 %); credits €10.00')
    await waitFor(() => expect(within(panel).getByTestId('tenant-incidents')).toHaveTextContent('a-su1-n01: PSU failed (1 resource down 2 h 00 min so far)'))
    expect(within(panel).getByTestId('tenant-incidents')).not.toHaveTextContent('b-n02')
  }, 20_000)

  it('names quotas in words with their units, and adds one chosen by name with a GPU model', async () => {
    const rows = [{ id: 'q2', organization: 'o1', project: null, scope: 'organization', resource: 'memory_mib', limit: 524288,
      usage: 65536, warnings: [], allowed_actions: ['update'], updated_at: '' }]
    const seen = stubApi({
      'GET /api/v1/me/': () => json({ email: 'ops@provider.example', staff_role: 'operator' }),
      'GET /api/v1/organizations/': () => json(page(ORGS)),
      'GET /api/v1/projects/': () => json(page([])),
      'GET /api/v1/quotas/': () => json(page(rows)),
      'POST /api/v1/quotas/': async (r) => {
        const body = await r.json()
        rows.push({ ...rows[0], id: 'q3', resource: body.resource, limit: body.limit, usage: 0 })
        return json(rows.at(-1), 201)
      },
    })
    renderPage(<AdminTenantsPage />)
    fireEvent.click(await screen.findByRole('button', { name: 'Delta Labs' }, { timeout: 5000 }))
    const panel = await screen.findByTestId('tenant-panel')
    const memory = await within(panel).findByTestId('quota-row', {}, { timeout: 5000 })
    expect(memory).toHaveTextContent('Memory')
    expect(memory).not.toHaveTextContent('memory_mib')
    expect(within(memory).getByTestId('quota-use')).toHaveTextContent('64 GiB of 512 GiB (13 %)')
    fireEvent.click(within(memory).getByRole('button', { name: 'Change the Memory quota of Delta Labs' }))
    const dialog = await screen.findByRole('dialog', { name: 'Memory quota of Delta Labs' })
    expect(dialog).toHaveTextContent('In use now: 64 GiB')
    expect(dialog).toHaveTextContent('In MiB')
    fireEvent.click(within(dialog).getByRole('button', { name: 'Cancel' }))
    fireEvent.click(within(panel).getByRole('combobox', { name: 'Resource' }))
    fireEvent.click(await screen.findByRole('option', { name: 'GPUs', hidden: true }))
    fireEvent.change(within(panel).getByRole('textbox', { name: /^GPU model/ }), { target: { value: 'H100-SXM5-80GB' } })
    fireEvent.change(within(panel).getByRole('textbox', { name: /^New limit/ }), { target: { value: '16' } })
    fireEvent.click(within(panel).getByRole('button', { name: 'Add quota' }))
    await waitFor(() => expect(within(panel).getAllByTestId('quota-row')).toHaveLength(2), { timeout: 5000 })
    expect(await seen.find((r) => r.method === 'POST')!.json()).toEqual({ organization: 'o1', resource: 'gpus:H100-SXM5-80GB', limit: 16 })
    expect(within(panel).getAllByTestId('quota-row')[1]).toHaveTextContent('H100-SXM5-80GB GPUs0 of 16 (0 %)')
  }, 20_000)

  it('says the SLA is met without provider-caused downtime', () => {
    expect(slaStanding('premium', [])).toEqual({ met: true, text: 'premium tier: met (no provider-caused downtime on record)' })
    const premium = { id: 'r2', organization: 'o1', project: 'p', resource_type: 'instance', resource_id: 'vm1', sla_tier: 'premium',
      period: '2026-12', held_minutes: '43200', downtime_minutes: '60', uptime_pct: '99.86', target_uptime_pct: '99.9000',
      credit_pct: '10', billed_amount: '4.00', credit_amount: '0.40', currency: 'USD', source_invoice: 'i', applied_invoice: null, applied_invoice_number: null }
    expect(slaStanding('standard', [premium]).text).toBe(
      'premium tier: missed for 1 resource-month; lowest uptime 99.860 % in 2026-12 (target 99.9 %); credits $0.40')
    expect(spendText({ total: '0', currency: 'USD', lines: [] })).toBe('$0.00 to date, 0 resources billed for 0 h')
  })

  it('is not found for a tenant, who never gets the organizations asked for', async () => {
    const seen = stubApi({ 'GET /api/v1/me/': () => json({ email: 'owner@keel.example', staff_role: '' }) })
    renderPage(<AdminTenantsPage />)
    expect(await screen.findByText('Not found')).toBeInTheDocument()
    expect(seen.some((r) => r.url.includes('/organizations/'))).toBe(false)
  })
})
