import { fireEvent, screen, waitFor, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { FleetSummary } from '../../api/client'
import { json, renderPage, stubApi } from '../../test/render'
import { AdminIncidentsPage, durationText, hostIds, incidentChanges } from './Incidents'
import { problem } from '../../test/render'

const page = <T,>(results: T[]) => ({ count: results.length, next: null, previous: null, results })
const HOST = { id: 'h-1', name: 'a-su1-n01', rack_unit: 1, condition: 'available', condition_reason: '', condition_changed_at: null,
  last_heartbeat_at: null, agent_version: '', provisioning_kind: 'hypervisor', gpu_model: 'H100-SXM5-80GB', mig: '', gpus: [] }
const SUMMARY = { generated_at: '', host_count: 1, gpu_count: 0, gpu_states: {}, host_conditions: {}, gpu_models: [],
  regions: [{ name: 'eu-west', zones: [{ name: 'eu-west-a', racks: [{ name: 'r01', hosts: [HOST] }] }] }] } as unknown as FleetSummary

describe('incidents', () => {
  it('says a downtime in words and finds hosts by name', () => {
    expect(durationText(null)).toBe('open')
    expect(durationText(45)).toBe('45 s')
    expect(durationText(600)).toBe('10 min')
    expect(durationText(7500)).toBe('2 h 05 min')
    expect(hostIds(SUMMARY).get('a-su1-n01')).toBe('h-1')
  })

  it('opens an incident for a host (mark faulty with a reason) and closes it (mark available)', async () => {
    let incident: Record<string, unknown> | null = null
    const seen = stubApi({
      'GET /api/v1/me/': () => json({ email: 'ops@provider.example', staff_role: 'operator' }),
      'GET /api/v1/fleet/summary/': () => json(SUMMARY),
      'GET /api/v1/sla-reports/': () => json(page([])),
      'GET /api/v1/incidents/': () => json(page(incident ? [incident] : [])),
      'POST /api/v1/hosts/h-1/mark-faulty/': async (r) => {
        const body = await r.json()
        incident = { id: 'i-1', host: 'a-su1-n01', gpu: null, gpu_index: null, start: '2026-12-04T03:00:00Z', end: null,
          duration_s: null, reason: body.reason, provider_at_fault: body.provider_at_fault }
        return json({ id: 'h-1', name: 'a-su1-n01', state: 'faulty' })
      },
      'POST /api/v1/hosts/h-1/mark-available/': () => {
        incident = { ...incident!, end: '2026-12-04T03:10:00Z', duration_s: 600 }
        return json({ id: 'h-1', name: 'a-su1-n01', state: 'available' })
      },
    })
    renderPage(<AdminIncidentsPage />)
    expect(await screen.findByText('No SLA credit yet (invoice runs make them for closed months).', {}, { timeout: 5000 })).toBeInTheDocument()
    fireEvent.click(await screen.findByRole('button', { name: 'Open incident' }))
    const dialog = await screen.findByRole('dialog', { name: 'Open an incident' })
    expect(within(dialog).getByRole('button', { name: 'Open incident' })).toBeDisabled()
    fireEvent.change(within(dialog).getByRole('combobox', { name: /^Host/ }), { target: { value: 'a-su1-n01' } })
    fireEvent.change(within(dialog).getByLabelText(/^Reason/), { target: { value: 'PSU failed' } })
    fireEvent.click(within(dialog).getByRole('button', { name: 'Open incident' }))
    const row = await screen.findByTestId('incident-row')
    expect(row).toHaveAttribute('data-open', 'true')
    expect(within(row).getByTestId('incident-duration')).toHaveTextContent('open')
    expect(await seen.find((r) => r.url.endsWith('/mark-faulty/'))!.json()).toEqual({ reason: 'PSU failed', provider_at_fault: true })
    fireEvent.click(within(row).getByRole('button', { name: 'Close the incident of a-su1-n01' }))
    const close = await screen.findByRole('dialog', { name: 'Close the incident of a-su1-n01?' })
    fireEvent.change(within(close).getByLabelText(/^Reason/), { target: { value: 'PSU replaced' } })
    fireEvent.click(within(close).getByRole('button', { name: 'Close incident' }))
    await waitFor(() => expect(screen.getByTestId('incident-duration')).toHaveTextContent('10 min'))
  }, 20_000)

  it('shows the SLA credits as money and percentages', async () => {
    stubApi({
      'GET /api/v1/me/': () => json({ email: 'ops@provider.example', staff_role: 'operator' }),
      'GET /api/v1/fleet/summary/': () => json(SUMMARY),
      'GET /api/v1/incidents/': () => json(page([])),
      'GET /api/v1/sla-reports/': () => json(page([{ id: 's-1', organization: 'o', project: 'p', resource_type: 'instance',
        resource_id: 'abcdef0123456789', sla_tier: 'premium', period: '2026-12', held_minutes: '43200', downtime_minutes: '10',
        uptime_pct: '99.97685185', target_uptime_pct: '99.5', credit_pct: '10', billed_amount: '4.00', credit_amount: '0.4',
        currency: 'USD', source_invoice: 'inv', applied_invoice: null, applied_invoice_number: null },
      { id: 's-2', organization: 'o', project: 'p', resource_type: 'instance',
        resource_id: '01a24712-0000-7000-8000-00008eba02c0', sla_tier: 'standard', period: '2026-10', held_minutes: '44640',
        downtime_minutes: '540.0000', uptime_pct: '98.79032258', target_uptime_pct: '99.9', credit_pct: '10', billed_amount: '1830.15',
        credit_amount: '183.02', currency: 'USD', source_invoice: 'inv', applied_invoice: 'inv-2', applied_invoice_number: 'INV-00000002' }])),
    })
    renderPage(<AdminIncidentsPage />)
    const [row, credited] = await screen.findAllByTestId('sla-row', {}, { timeout: 5000 })
    expect(row).toHaveTextContent('99.9769 % (target 99.5 %)')
    expect(row).toHaveTextContent('10 %')
    expect(row).toHaveTextContent('$0.40')
    expect(row).toHaveTextContent('next invoice')
    // a credited one names its invoice by number (a link), its downtime in minutes, its instance by the id's end
    expect(within(credited).getByRole('link', { name: 'INV-00000002' })).toHaveAttribute('href', '/staff/billing/invoices/inv-2')
    expect(credited).toHaveTextContent('540 min')
    expect(credited).toHaveTextContent('instance 8eba02c0')
  }, 20_000)

  it('sends only the changed fields of an incident, an end only for a closed one', () => {
    const open = { id: 'i', host: 'h', gpu: null, gpu_index: null, start: '2026-12-04T03:00:00Z', end: null, duration_s: null,
      reason: 'PSU', provider_at_fault: true }
    expect(incidentChanges(open, { start: '2026-12-04T03:00', end: '2026-12-04T05:00', reason: 'PSU ', fault: true })).toEqual({})
    expect(incidentChanges(open, { start: '2026-12-04T01:30', end: '', reason: 'PSU failed', fault: false }))
      .toEqual({ start: '2026-12-04T01:30:00.000Z', reason: 'PSU failed', provider_at_fault: false })
    expect(incidentChanges({ ...open, end: '2026-12-04T05:00:00Z' }, { start: '2026-12-04T03:00', end: '2026-12-04T04:00', reason: 'PSU', fault: true }))
      .toEqual({ end: '2026-12-04T04:00:00.000Z' })
  })

  it('shows what an incident caused and corrects it, the server\'s refusal on the field', async () => {
    let incident = { id: 'i-1', host: 'a-su1-n01', gpu: null, gpu_index: null, start: '2026-12-04T03:00:00Z', end: null,
      duration_s: null, reason: 'PSU', provider_at_fault: true }
    const seen = stubApi({
      'GET /api/v1/me/': () => json({ email: 'ops@provider.example', staff_role: 'operator' }),
      'GET /api/v1/fleet/summary/': () => json(SUMMARY),
      'GET /api/v1/sla-reports/': () => json(page([])),
      'GET /api/v1/incidents/': () => json(page([incident])),
      'GET /api/v1/incidents/i-1/impact/': () => json({ incident: 'i-1', open: true, counts_for_sla: true, downtime_s: 7200,
        credits: [{ currency: 'USD', amount: '12.50' }],
        resources: [{ resource_type: 'instance', resource_id: 'vm-0001-abcd', partial: false, organization: 'o', organization_name: 'Delta',
          project: 'p', downtime_s: 7200, credits: [{ period: '2026-11', currency: 'USD', credit_amount: '12.50', report_credit_amount: '25.00',
            credit_pct: '10', uptime_pct: '98', sla_report: 's', applied_invoice: null }] }] }),
      'PATCH /api/v1/incidents/i-1/': async (r) => {
        const body = await r.json()
        if (body.start === '2020-01-01T00:00:00.000Z') return problem(400, 'invalid_time', 'before', { start: ['before the previous incident\'s end'] })
        incident = { ...incident, ...body }
        return json(incident)
      },
    })
    renderPage(<AdminIncidentsPage />)
    fireEvent.click(await screen.findByRole('button', { name: /^Details of the incident of a-su1-n01/ }, { timeout: 5000 }))
    const dialog = await screen.findByRole('dialog', { name: 'Incident of a-su1-n01' })
    expect(await within(dialog).findByTestId('incident-impact-summary')).toHaveTextContent(
      '1 resource down for 2 h 00 min in all so far; SLA credits $12.50.')
    expect(within(dialog).getByTestId('incident-resource')).toHaveTextContent('Delta')
    expect(within(dialog).getByTestId('incident-resource')).toHaveTextContent('2026-11: $12.50')
    expect(within(dialog).getByLabelText(/^End/)).toBeDisabled()
    fireEvent.change(within(dialog).getByLabelText(/^Start/), { target: { value: '2020-01-01T00:00' } })
    fireEvent.click(within(dialog).getByRole('button', { name: 'Save changes' }))
    expect(await within(dialog).findByText("before the previous incident's end")).toBeInTheDocument()
    fireEvent.change(within(dialog).getByLabelText(/^Start/), { target: { value: '2026-12-04T01:30' } })
    fireEvent.click(within(dialog).getByLabelText(/provider is at fault/))
    fireEvent.click(within(dialog).getByRole('button', { name: 'Save changes' }))
    await waitFor(() => expect(seen.filter((r) => r.method === 'PATCH').length).toBe(2))
    expect(await seen.filter((r) => r.method === 'PATCH')[1].json()).toEqual({ start: '2026-12-04T01:30:00.000Z', provider_at_fault: false })
  }, 20_000)

  it('is not found for a tenant, who never gets the incidents asked for', async () => {
    const seen = stubApi({ 'GET /api/v1/me/': () => json({ email: 'owner@keel.example', staff_role: '' }) })
    renderPage(<AdminIncidentsPage />)
    expect(await screen.findByText('Not found')).toBeInTheDocument()
    expect(seen.some((r) => r.url.includes('/incidents/'))).toBe(false)
  })
})
