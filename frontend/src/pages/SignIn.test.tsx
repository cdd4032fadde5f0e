import { fireEvent, screen, waitFor } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import { json, problem, renderPage, stubApi } from '../test/render'
import { SignInPage, safeNext } from './SignIn'

const ANONYMOUS = { authenticated: false, email: null, two_factor_verified: false, sign_in_method: null, second_factor_needed: null, csrf_token: 't', sso_login_url: null }
const SIGNED_IN = { ...ANONYMOUS, authenticated: true, email: 'a@b.example', sign_in_method: 'password' }

function fill(label: RegExp, value: string) {
  fireEvent.change(screen.getByLabelText(label), { target: { value } })
}

describe('sign in', () => {
  it('shows the problem detail and keeps what was typed when the password is wrong', async () => {
    stubApi({
      'GET /api/v1/session/': () => json(ANONYMOUS),
      'POST /api/v1/session/': () => problem(401, 'invalid_credentials', 'E-mail or password is wrong.'),
    })
    renderPage(<SignInPage />)
    fill(/^E-mail/, 'a@b.example')
    fill(/^Password/, 'nope')
    fireEvent.click(screen.getByRole('button', { name: 'Sign in' }))
    expect(await screen.findByRole('alert')).toHaveTextContent('E-mail or password is wrong.')
    expect(screen.getByLabelText(/^E-mail/)).toHaveValue('a@b.example')
  })

  it('asks for the authenticator code when the API answers otp_required, then sends it', async () => {
    const seen = stubApi({
      'GET /api/v1/session/': () => json(ANONYMOUS),
      'POST /api/v1/session/': async (request) => {
        const body = await request.json()
        return body.otp_token ? json(SIGNED_IN) : problem(401, 'otp_required', 'Enter the code from your authenticator app.')
      },
    })
    renderPage(<SignInPage />, { path: '/sign-in?next=/instances', route: '/sign-in' })
    fill(/^E-mail/, 'a@b.example')
    fill(/^Password/, 'right password')
    fireEvent.click(screen.getByRole('button', { name: 'Sign in' }))
    const code = await screen.findByLabelText(/^Authentication code/)
    expect(screen.queryByRole('alert')).toBeNull()
    fireEvent.change(code, { target: { value: '123456' } })
    fireEvent.click(screen.getByRole('button', { name: 'Verify code' }))
    await waitFor(() => expect(screen.getByTestId('elsewhere')).toBeInTheDocument())
    const posts = seen.filter((r) => r.method === 'POST')
    expect(await posts[1].json()).toEqual({ email: 'a@b.example', password: 'right password', otp_token: '123456' })
  })

  it('offers single sign-on only when the server has it configured', async () => {
    stubApi({ 'GET /api/v1/session/': () => json({ ...ANONYMOUS, sso_login_url: '/oidc/authenticate/' }) })
    renderPage(<SignInPage />)
    const link = await screen.findByRole('link', { name: 'Sign in with single sign-on' })
    expect(link).toHaveAttribute('href', '/oidc/authenticate/?next=%2F')
  })

  it('returns only to local paths', () => {
    expect(safeNext('/instances/1')).toBe('/instances/1')
    expect(safeNext('//evil.example/x')).toBe('/')
    expect(safeNext('https://evil.example')).toBe('/')
    expect(safeNext(null)).toBe('/')
  })
})
