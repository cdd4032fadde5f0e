import { fireEvent, screen, waitFor, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import { json, problem, renderPage, stubApi } from '../../test/render'
import { AdminHealthEventsPage, NO_HEALTH_FILTERS, deviceText, eventText, healthQuery } from './HealthEvents'

const page = <T,>(results: T[]) => ({ next: null, previous: null, results })
const EVENT = {
  id: 'e1', host: 'a-su1-n01', host_id: 'h1', gpu_index: 1, hca_port: null, kind: 'xid', xid: 48, count: 1,
  observed_at: '2026-12-01T10:00:00Z', source: 'agent', message: 'DBE on GPU 1', classification: 'gpu_memory_uncorrectable',
  classification_version: 2, effects: ['cordon_gpu', 'reset_gpu'], actions: ['gpu_mark_faulty'], pending: ['reset_gpu'],
  incident: 'i1', needs_return_to_service: true, impact_count: 2,
}
const THERMAL = { ...EVENT, id: 'e2', host: 'b-su1-n02', gpu_index: null, kind: 'thermal', xid: null, count: 3, message: '',
  classification: '', effects: [], actions: [], pending: [], incident: null, impact_count: 0, source: 'control_plane' }
const TABLE = { version: 2, rows: [{ id: 'xid-48', class: 'gpu_memory_uncorrectable' }, { id: 'xid-79', class: 'gpu_lost' }] }
const LONG = { timeout: 5000 }

describe('staff health events', () => {
  it('asks only for the filters given and says each event in words', () => {
    expect(healthQuery(NO_HEALTH_FILTERS)).toEqual({})
    expect(healthQuery({ host: ' a-su1-n01 ', kind: 'xid', classification: 'gpu_lost', after: '2026-12-01T10:00', before: '' }))
      .toEqual({ host: 'a-su1-n01', kind: 'xid', classification: 'gpu_lost', observed_after: '2026-12-01T10:00:00.000Z' })
    expect(eventText(EVENT)).toBe('XID 48')
    expect(eventText(THERMAL)).toBe('Thermal violation ×3')
    expect(deviceText(EVENT)).toBe('GPU 1')
    expect(deviceText({ gpu_index: null, hca_port: 'mlx5_0' })).toBe('port mlx5_0')
    expect(deviceText(THERMAL)).toBe('host')
    const sxid = { ...THERMAL, kind: 'nvswitch_fatal', xid: 24007, count: 1, nvswitch: '0000:07:00.0', nvswitch_port: 32 }
    expect(eventText(sxid)).toBe('NVSwitch fatal error SXid 24007')
    expect(deviceText(sxid)).toBe('NVSwitch 0000:07:00.0 port 32')
  })

  it('lists the fleet\'s events, opens filtered by ?host= and filters by kind and class', async () => {
    const seen = stubApi({
      'GET /api/v1/me/': () => json({ email: 'support@provider.example', staff_role: 'support' }),
      'GET /api/v1/health/classification/': () => json(TABLE),
      'GET /api/v1/health/events/': (r) => {
        const q = new URL(r.url).searchParams
        if (q.get('kind') === 'thermal') return json(page([]))
        return json(page(q.get('host') === 'a-su1-n01' ? [EVENT] : [THERMAL, EVENT]))
      },
    })
    renderPage(<AdminHealthEventsPage />, { path: '/staff/health-events?host=a-su1-n01' })
    const row = await screen.findByTestId('health-event', {}, LONG)
    expect(screen.getByLabelText(/^Host/)).toHaveValue('a-su1-n01')
    expect(row).toHaveTextContent('2026-12-01 10:00:00')
    expect(row).toHaveTextContent('a-su1-n01GPU 1')
    expect(row).toHaveTextContent('XID 48DBE on GPU 1')
    expect(row).toHaveTextContent('gpu_memory_uncorrectable')
    expect(row).toHaveTextContent('gpu mark faulty')
    expect(row).toHaveTextContent('pending: reset gpu')
    expect(row).toHaveTextContent('incident')
    fireEvent.change(screen.getByLabelText(/^Host/), { target: { value: '' } })
    fireEvent.click(screen.getByRole('combobox', { name: /^Class/ }))
    fireEvent.click(await screen.findByRole('option', { name: 'gpu_lost', hidden: true }))
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }))
    await waitFor(() => expect(screen.getAllByTestId('health-event')).toHaveLength(2), LONG)
    const q = new URL(seen.filter((r) => r.url.includes('/health/events/')).at(-1)!.url).searchParams
    expect(q.get('classification')).toBe('gpu_lost')
    expect(q.get('host')).toBeNull()
    expect(within(screen.getAllByTestId('health-event')[0]).getByText('no rule matched')).toBeInTheDocument()
    fireEvent.click(screen.getByRole('combobox', { name: /^Kind/ }))
    fireEvent.click(await screen.findByRole('option', { name: 'Thermal violation', hidden: true }))
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }))
    expect(await screen.findByText('No events match', {}, LONG)).toBeInTheDocument()
  }, 20_000)

  it('shows the server\'s refusal of a filter on its field', async () => {
    stubApi({
      'GET /api/v1/me/': () => json({ email: 'ops@provider.example', staff_role: 'operator' }),
      'GET /api/v1/health/classification/': () => json(TABLE),
      'GET /api/v1/health/events/': (r) => (new URL(r.url).searchParams.get('observed_after')
        ? problem(400, 'validation_failed', 'Invalid input.', { observed_after: ['Enter a valid date/time.'] })
        : json(page([EVENT]))),
    })
    renderPage(<AdminHealthEventsPage />)
    await screen.findByTestId('health-event', {}, LONG)
    fireEvent.change(screen.getByLabelText(/^From/), { target: { value: '2026-12-01T10:00' } })
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }))
    expect(await screen.findByText('Enter a valid date/time.', {}, LONG)).toBeInTheDocument()
  }, 20_000)

  it('is Not found for a tenant', async () => {
    stubApi({ 'GET /api/v1/me/': () => json({ email: 'owner@acme.test', staff_role: '' }) })
    renderPage(<AdminHealthEventsPage />)
    expect(await screen.findByText(/not found/i, {}, LONG)).toBeInTheDocument()
  })
})
