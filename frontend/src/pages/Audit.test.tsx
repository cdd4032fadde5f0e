import { fireEvent, screen, waitFor } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { Organization } from '../api/client'
import { PROJECT, json, renderPage, scope, stubApi } from '../test/render'
import { AuditPage, auditQuery, auditResult } from './Audit'

const ORG = { id: PROJECT.organization, name: 'Acme', can_manage_members: false, role: 'viewer' } as Organization
const EVENT = {
  id: 'e1', created_at: '2026-12-01T10:00:00.123Z', actor: 'u1', actor_email: 'owner@acme.test', actor_is_staff: false,
  token_prefix: '', organization: ORG.id, project: PROJECT.id, action: 'api_token.create', target_type: 'identity.apitoken',
  target_id: 't1', before: null, after: { name: 'ci' }, request_id: 'r', source_ip: '192.0.2.1',
}
const LONG = { timeout: 5000 }

describe('audit log', () => {
  it('asks only for the filters given, times as UTC ISO 8601', () => {
    expect(auditQuery('o', { action: '', actor: '', after: '', before: '' })).toEqual({ organization: 'o' })
    expect(auditQuery('o', { action: 'api_token.', actor: ' a@b.c ', after: '2026-12-01T10:00', before: '2026-12-02T00:00' }))
      .toEqual({ organization: 'o', action: 'api_token.', actor: 'a@b.c', created_after: '2026-12-01T10:00:00.000Z', created_before: '2026-12-02T00:00:00.000Z' })
  })

  it('says a refused or failed attempt from its action', () => {
    expect(auditResult('api_token.create_refused')).toBe('refused')
    expect(auditResult('session.login_failed')).toBe('failed')
    expect(auditResult('api_token.create')).toBe('done')
  })

  it('lists the events and filters by action from the first page', async () => {
    const seen = stubApi({
      'GET /api/v1/audit-events/': (r) =>
        json({ results: new URL(r.url).searchParams.get('action') === 'vpc.' ? [] : [EVENT], next: null, previous: null }),
    })
    renderPage(<AuditPage />, { value: scope({ organization: ORG, organizations: [ORG] }) })
    const row = await screen.findByTestId('audit-event', {}, LONG)
    expect(row).toHaveTextContent('2026-12-01 10:00:00')
    expect(row).toHaveTextContent('owner@acme.test')
    expect(row).toHaveTextContent('api_token.create')
    expect(row).toHaveTextContent('identity.apitoken')
    fireEvent.change(screen.getByLabelText(/^Action/), { target: { value: 'vpc.' } })
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }))
    expect(await screen.findByText('No events match', {}, LONG)).toBeInTheDocument()
    await waitFor(() => expect(seen.at(-1)!.url).toContain('action=vpc.'))
    expect(new URL(seen.at(-1)!.url).searchParams.get('organization')).toBe(ORG.id)
    expect(new URL(seen.at(-1)!.url).searchParams.get('cursor')).toBeNull()
  })
})
