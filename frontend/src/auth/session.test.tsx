import { act, fireEvent, screen, waitFor } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { Session } from '../api/client'
import { NetworkingPage } from '../pages/Networking'
import { createQueryClient } from '../queryClient'
import { json, problem, renderPage, stubApi } from '../test/render'
import { sessionKey } from './session'

const SIGNED_IN = {
  authenticated: true, email: 'owner@example.com', two_factor_verified: false, sign_in_method: 'password',
  second_factor_needed: '', csrf_token: 'x', sso_login_url: null,
} as unknown as Session
const page = <T,>(results: T[]) => ({ results, next: null, previous: null })
const LONG = { timeout: 5000 }

describe('a session that ended while a screen was open', () => {
  it('clears the refusal it caused once the same person has signed in again; other refusals stay', async () => {
    let answer = () => problem(403, 'not_authenticated', 'Authentication credentials were not provided.')
    stubApi({
      'GET /api/v1/vpcs/': () => json(page([])),
      'POST /api/v1/vpcs/': () => answer(),
    })
    const client = createQueryClient()   // the console's: a signed-out answer turns the cached session anonymous
    client.setQueryData(sessionKey, SIGNED_IN)
    renderPage(<NetworkingPage />, { client })
    fireEvent.change(await screen.findByLabelText(/^Name/, {}, LONG), { target: { value: 'prod' } })
    fireEvent.change(screen.getByLabelText(/^IPv4 CIDR/), { target: { value: '10.20.0.0/16' } })
    fireEvent.click(screen.getByRole('button', { name: 'Create VPC' }))
    // behind the "Sign in again" dialog the refusal is shown, and the session is anonymous
    expect(await screen.findByText('Authentication credentials were not provided.', {}, LONG)).toBeInTheDocument()
    expect(client.getQueryData<Session>(sessionKey)?.authenticated).toBe(false)
    // the same person signs in again (what useSignIn does with the answer): the old refusal goes, the typing stays
    act(() => client.setQueryData(sessionKey, SIGNED_IN))
    await waitFor(() => expect(screen.queryByText('Authentication credentials were not provided.')).toBeNull())
    expect(screen.queryByText('The VPC was not created')).toBeNull()
    expect(screen.getByLabelText(/^Name/)).toHaveValue('prod')
    // a refusal of the new session is shown as always
    answer = () => problem(400, 'validation_error', 'Invalid input.', { cidr: ['Not inside RFC 1918.'] })
    fireEvent.click(screen.getByRole('button', { name: 'Create VPC' }))
    expect(await screen.findByText('The VPC was not created', {}, LONG)).toBeInTheDocument()
  }, 20_000)
})
