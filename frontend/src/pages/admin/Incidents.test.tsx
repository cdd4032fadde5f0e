import { fireEvent, screen, waitFor, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { FleetSummary } from '../../api/client'
import { json, renderPage, stubApi } from '../../test/render'
import { AdminIncidentsPage, durationText, hostIds } from './Incidents'

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

  it('is not found for a tenant, who never gets the incidents asked for', async () => {
    const seen = stubApi({ 'GET /api/v1/me/': () => json({ email: 'owner@keel.example', staff_role: '' }) })
    renderPage(<AdminIncidentsPage />)
    expect(await screen.findByText('Not found')).toBeInTheDocument()
    expect(seen.some((r) => r.url.includes('/incidents/'))).toBe(false)
  })
})
