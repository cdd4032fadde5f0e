import { fireEvent, screen, waitFor, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { Organization } from '../api/client'
import { PROJECT, json, renderPage, scope, stubApi } from '../test/render'
import { TokensPage, tokenBody } from './Tokens'

const TOKEN = {
  id: '0190a3b4-0000-7000-8000-0000000000d1', name: 'ci', prefix: 'gpc_ab12cd', scope: 'read', binding: 'project',
  organization: null, project: PROJECT.id, user: 'u1', user_email: 'owner@example.com', created_at: '2026-12-01T00:00:00Z',
  expires_at: '2027-03-01T00:00:00Z', last_used_at: null, revoked_at: null, parent: null,
}
const page = <T,>(results: T[]) => ({ results, next: null, previous: null })
const SESSION = { authenticated: true, email: 'owner@example.com', two_factor_verified: false, sign_in_method: 'password', second_factor_needed: '', csrf_token: 'x', sso_login_url: null }

describe('API tokens', () => {
  it('builds the create body from the form: binding and expiry in days', () => {
    const now = new Date('2026-12-01T00:00:00Z')
    const ids = { project: 'p', organization: 'o' }
    expect(tokenBody({ name: 'ci', scope: 'write', binding: 'project', days: 30 }, ids, now))
      .toEqual({ name: 'ci', scope: 'write', staff: false, project: 'p', expires_at: '2026-12-31T00:00:00.000Z' })
    expect(tokenBody({ name: 'ci', scope: 'read', binding: 'organization', days: 7 }, ids, now))
      .toEqual({ name: 'ci', scope: 'read', staff: false, organization: 'o', expires_at: '2026-12-08T00:00:00.000Z' })
  })

  it('shows the secret of a new token once, with a warning, and lists the caller’s tokens only', async () => {
    let created = false
    const seen = stubApi({
      'GET /api/v1/session/': () => json(SESSION),
      'GET /api/v1/tokens/': () => json(page(created ? [TOKEN] : [])),
      'POST /api/v1/tokens/': () => {
        created = true
        return json({ ...TOKEN, token: 'gpc_ab12cd_s3cr3t' }, 201)
      },
    })
    renderPage(<TokensPage />)
    expect(await screen.findByText('No API tokens yet', {}, { timeout: 5000 })).toBeInTheDocument()
    fireEvent.change(screen.getByLabelText(/^Name/), { target: { value: 'ci' } })
    fireEvent.click(screen.getByRole('button', { name: 'Create token' }))
    expect(await screen.findByTestId('token-secret', {}, { timeout: 5000 })).toHaveTextContent('gpc_ab12cd_s3cr3t')
    expect(screen.getByText(/you will not see it again/)).toBeInTheDocument()
    expect(await screen.findByRole('button', { name: /^Revoke token ci \(/ }, { timeout: 5000 })).toBeEnabled()
    const list = seen.find((r) => r.method === 'GET' && r.url.includes('/tokens/'))!
    expect(new URL(list.url).searchParams.get('user_email')).toBe('owner@example.com')
    const post = seen.find((r) => r.method === 'POST')!
    const body = await post.json()
    expect(body).toMatchObject({ name: 'ci', scope: 'read', project: PROJECT.id })
    fireEvent.click(screen.getByRole('button', { name: 'Dismiss' }))
    await waitFor(() => expect(screen.queryByTestId('token-secret')).toBeNull())
  })

  it('binds a new token to the organization when it has no project yet', async () => {
    const seen = stubApi({
      'GET /api/v1/session/': () => json(SESSION),
      'GET /api/v1/tokens/': () => json(page([])),
      'POST /api/v1/tokens/': () => json({ ...TOKEN, project: null, organization: PROJECT.organization, token: 'gpc_x' }, 201),
    })
    const org = { id: PROJECT.organization, name: 'Acme' } as Organization
    renderPage(<TokensPage />, { value: scope({ organizations: [org], organization: org, projects: [], project: null, canWrite: false }) })
    expect(await screen.findByText('No API tokens yet', {}, { timeout: 5000 })).toBeInTheDocument()
    expect(screen.getByRole('combobox', { name: /^Works in/ })).toHaveValue('organization Acme')
    fireEvent.change(screen.getByLabelText(/^Name/), { target: { value: 'ci' } })
    fireEvent.click(screen.getByRole('button', { name: 'Create token' }))
    expect(await screen.findByTestId('token-secret', {}, { timeout: 5000 })).toHaveTextContent('gpc_x')
    const body = await seen.find((r) => r.method === 'POST')!.json()
    expect(body).toMatchObject({ name: 'ci', organization: PROJECT.organization })
    expect(body.project).toBeUndefined()
  })

  it('hides the new secret’s banner once that token is revoked (revoking another token leaves it)', async () => {
    const OTHER = { ...TOKEN, id: '0190a3b4-0000-7000-8000-0000000000d2', name: 'old', prefix: 'gpc_ef34gh' }
    const revoked = new Set<string>()
    let created = false
    const tokens = () => [...(created ? [TOKEN] : []), OTHER].map((t) => ({ ...t, revoked_at: revoked.has(t.id) ? '2026-12-02T00:00:00Z' : null }))
    stubApi({
      'GET /api/v1/session/': () => json(SESSION),
      'GET /api/v1/tokens/': () => json(page(tokens())),
      'POST /api/v1/tokens/': () => {
        created = true
        return json({ ...TOKEN, token: 'gpc_ab12cd_s3cr3t' }, 201)
      },
      [`DELETE /api/v1/tokens/${TOKEN.id}/`]: () => { revoked.add(TOKEN.id); return new Response(null, { status: 204 }) },
      [`DELETE /api/v1/tokens/${OTHER.id}/`]: () => { revoked.add(OTHER.id); return new Response(null, { status: 204 }) },
    })
    renderPage(<TokensPage />)
    fireEvent.change(await screen.findByLabelText(/^Name/, {}, { timeout: 5000 }), { target: { value: 'ci' } })
    fireEvent.click(screen.getByRole('button', { name: 'Create token' }))
    expect(await screen.findByTestId('token-secret', {}, { timeout: 5000 })).toHaveTextContent('gpc_ab12cd_s3cr3t')
    const revoke = async (name: RegExp) => {
      fireEvent.click(await screen.findByRole('button', { name }, { timeout: 5000 }))
      const dialog = await screen.findByRole('dialog')
      fireEvent.click(within(dialog).getByRole('button', { name: 'Revoke' }))
      await waitFor(() => expect(screen.queryByRole('button', { name })).toBeNull(), { timeout: 5000 })
    }
    await revoke(/^Revoke token old \(/)
    expect(screen.getByTestId('token-secret')).toHaveTextContent('gpc_ab12cd_s3cr3t')
    await revoke(/^Revoke token ci \(/)
    await waitFor(() => expect(screen.queryByTestId('new-token')).toBeNull())
  })

  it('lets a viewer manage their own tokens (the API allows the holder)', async () => {
    stubApi({ 'GET /api/v1/session/': () => json(SESSION), 'GET /api/v1/tokens/': () => json(page([TOKEN])) })
    renderPage(<TokensPage />, { value: scope({ canWrite: false }) })
    expect(await screen.findByRole('button', { name: /^Revoke token ci \(/ }, { timeout: 5000 })).toBeEnabled()
    expect(screen.getByRole('button', { name: 'Create token' })).toBeEnabled()
  })
})
