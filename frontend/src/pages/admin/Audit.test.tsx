import { fireEvent, screen, waitFor, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import { json, problem, renderPage, stubApi } from '../../test/render'
import { actionText, auditChanges, auditTargetName } from '../Audit'
import { AdminAuditPage, NO_STAFF_FILTERS, staffAuditQuery } from './Audit'

const page = <T,>(results: T[]) => ({ next: null, previous: null, results })
const ACME = { id: 'o-acme', name: 'Acme', slug: 'acme' }
const EVENT = {
  id: 'e1', created_at: '2026-12-01T10:00:00.123Z', actor: 'u1', actor_email: 'ops@provider.example', actor_is_staff: true,
  token_prefix: '', organization: ACME.id, project: null, action: 'quota.update', target_type: 'tenancy.quota',
  target_id: 'q1', before: { limit: 8 }, after: { limit: 16 }, request_id: 'r', source_ip: '192.0.2.1',
}
const FLEET_EVENT = { ...EVENT, id: 'e2', organization: null, action: 'host.cordon', target_type: 'inventory.host', target_id: 'h1' }
const LONG = { timeout: 5000 }

describe('staff audit log', () => {
  it('asks only for the filters given, the actor kind as a boolean and times as UTC ISO 8601', () => {
    expect(staffAuditQuery(NO_STAFF_FILTERS)).toEqual({})
    expect(staffAuditQuery({ ...NO_STAFF_FILTERS, staff: 'false', organization: 'o', targetType: ' inventory. ', targetId: 'h1',
      after: '2026-12-01T10:00' })).toEqual({ actor_is_staff: false, organization: 'o', target_type: 'inventory.',
      target_id: 'h1', created_after: '2026-12-01T10:00:00.000Z' })
  })

  it('lists every organization\'s events and the fleet\'s, then filters by organization and staff', async () => {
    const seen = stubApi({
      'GET /api/v1/me/': () => json({ email: 'support@provider.example', staff_role: 'support' }),
      'GET /api/v1/organizations/': () => json(page([ACME])),
      'GET /api/v1/audit-events/': (r) => {
        const q = new URL(r.url).searchParams
        if (q.get('actor_is_staff') === 'maybe') return problem(400, 'validation_error', 'bad', { actor_is_staff: ['a boolean'] })
        return json(page(q.get('organization') === ACME.id ? [EVENT] : [EVENT, FLEET_EVENT]))
      },
    })
    renderPage(<AdminAuditPage />)
    expect(await screen.findByText('host.cordon', {}, LONG)).toBeInTheDocument()
    const rows = screen.getAllByTestId('audit-event')
    expect(rows[0]).toHaveTextContent('Acme')
    expect(rows[0]).toHaveTextContent('staff')
    expect(rows[1]).toHaveTextContent('—')
    fireEvent.click(screen.getByRole('combobox', { name: /^Organization/ }))
    fireEvent.click(await screen.findByRole('option', { name: 'Acme (acme)', hidden: true }))
    fireEvent.click(screen.getByRole('combobox', { name: /^Actor kind/ }))
    fireEvent.click(await screen.findByRole('option', { name: 'Provider staff', hidden: true }))
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }))
    await waitFor(() => expect(screen.queryByText('host.cordon')).toBeNull(), LONG)
    const q = new URL(seen.filter((r) => r.url.includes('audit-events')).at(-1)!.url).searchParams
    expect(q.get('organization')).toBe(ACME.id)
    expect(q.get('actor_is_staff')).toBe('true')
  }, 20_000)   // two pickers and a wide table: slow on a loaded machine

  it('names the object and says what changed, field by field', () => {
    expect(auditTargetName({ target_name: 'a-su1-n01', before: null, after: { name: 'old' } })).toBe('a-su1-n01')
    expect(auditTargetName({ target_name: null, before: { name: 'trainer' }, after: { status: 'deleted' } })).toBe('trainer')
    expect(auditTargetName({ before: null, after: { display_number: 'INV-00000007' } })).toBe('INV-00000007')
    expect(auditTargetName({ target_name: null, before: { limit: 8 }, after: { limit: 16 } })).toBeNull()
    expect(actionText('inventory.host.cordon')).toBe('host: cordon')
    expect(actionText('session.login_failed')).toBe('session: login failed')
    expect(auditChanges({ before: { state: 'available', reason: '', same: 1 }, after: { state: 'cordoned', reason: 'PSU swap', same: 1, by: { id: 2 } } }))
      .toEqual([
        { field: 'state', kind: 'changed', before: 'available', after: 'cordoned' },
        { field: 'reason', kind: 'changed', before: '—', after: 'PSU swap' },
        { field: 'by', kind: 'set', before: '—', after: '{"id":2}' },
      ])
    expect(auditChanges({ before: { port: 'p1' }, after: null })).toEqual([{ field: 'port', kind: 'removed', before: 'p1', after: '—' }])
    expect(auditChanges({ before: null, after: null })).toEqual([])
  })

  it('shows each event\'s object by name and its before → after in the table', async () => {
    stubApi({
      'GET /api/v1/me/': () => json({ email: 'support@provider.example', staff_role: 'support' }),
      'GET /api/v1/organizations/': () => json(page([ACME])),
      'GET /api/v1/audit-events/': () => json(page([
        { ...FLEET_EVENT, target_name: 'a-su1-n01', before: { state: 'available' }, after: { state: 'cordoned', reason: 'PSU swap' } },
        { ...EVENT, target_name: null },
      ])),
    })
    renderPage(<AdminAuditPage />)
    const rows = await screen.findAllByTestId('audit-event', {}, LONG)
    expect(within(rows[0]).getByTestId('audit-object')).toHaveTextContent(/^a-su1-n01inventory\.host/)
    expect(rows[0]).toHaveTextContent('host: cordon')
    const changes = within(rows[0]).getByTestId('audit-changes')
    expect(changes).toHaveTextContent('state available → cordoned')
    expect(changes).toHaveTextContent('reason PSU swap')
    expect(within(rows[1]).getByTestId('audit-changes')).toHaveTextContent('limit 8 → 16')
    expect(within(rows[1]).getByTestId('audit-object')).toHaveTextContent('tenancy.quotaq1')   // no name: its id
  }, 20_000)

  it('is Not found for a tenant', async () => {
    stubApi({
      'GET /api/v1/me/': () => json({ email: 'owner@acme.test', staff_role: '' }),
    })
    renderPage(<AdminAuditPage />)
    expect(await screen.findByText(/not found/i, {}, LONG)).toBeInTheDocument()
  })
})
