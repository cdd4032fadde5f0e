import { afterEach, describe, expect, it } from 'vitest'
import { problem, stubApi, json } from '../test/render'
import { ApiError, api, csrfToken, cursorOf, flattenErrors, unwrap } from './client'

describe('csrfToken', () => {
  it('reads the csrftoken cookie among others', () => {
    expect(csrfToken('sessionid=abc; csrftoken=tok%3D1; other=x')).toBe('tok=1')
    expect(csrfToken('sessionid=abc')).toBeNull()
  })
})

describe('the client', () => {
  afterEach(() => {
    document.cookie = 'csrftoken=; expires=Thu, 01 Jan 1970 00:00:00 GMT'
  })

  it('sends the CSRF token on unsafe methods only', async () => {
    document.cookie = 'csrftoken=secret-token'
    const seen = stubApi({
      'GET /api/v1/session/': () => json({ authenticated: false }),
      'DELETE /api/v1/session/': () => new Response(null, { status: 204 }),
    })
    await api.GET('/api/v1/session/')
    await api.DELETE('/api/v1/session/')
    expect(seen[0].headers.get('X-CSRFToken')).toBeNull()
    expect(seen[1].headers.get('X-CSRFToken')).toBe('secret-token')
  })

  it('asks the session for a CSRF cookie before an unsafe request when the cookie is gone (session ended)', async () => {
    const seen = stubApi({
      'GET /api/v1/session/': () => {
        document.cookie = 'csrftoken=fresh-token'
        return json({ authenticated: false })
      },
      'POST /api/v1/session/': () => json({ authenticated: true }),
    })
    await api.POST('/api/v1/session/', { body: { email: 'a@b.example', password: 'p', otp_token: '' } })
    expect(seen.map((r) => r.method)).toEqual(['GET', 'POST'])
    expect(seen[1].headers.get('X-CSRFToken')).toBe('fresh-token')
  })

  it('turns a problem+json answer into an ApiError with its detail, code and field errors', async () => {
    stubApi({
      'POST /api/v1/ssh-keys/': () => problem(400, 'validation_error', 'The key is not valid.', { public_key: ['Not an OpenSSH key.'] }),
    })
    const error = await unwrap(api.POST('/api/v1/ssh-keys/', { body: { project: 'p', name: 'k', public_key: 'x' } })).catch((e) => e)
    expect(error).toBeInstanceOf(ApiError)
    expect(error.status).toBe(400)
    expect(error.code).toBe('validation_error')
    expect(error.detail).toBe('The key is not valid.')
    expect(error.errors).toEqual({ public_key: ['Not an OpenSSH key.'] })
  })
})

describe('flattenErrors', () => {
  it('names nested and listed fields with dots', () => {
    expect(flattenErrors({ name: ['Too long.'], network: { subnet: ['Unknown.'] }, detail: 'x' })).toEqual({
      name: ['Too long.'], 'network.subnet': ['Unknown.'], detail: ['x'],
    })
    expect(flattenErrors(undefined)).toEqual({})
  })
})

describe('cursorOf', () => {
  it('takes the cursor of a next/previous URL', () => {
    expect(cursorOf('http://h/api/v1/instances/?cursor=cD0yMDI2&page_size=20')).toBe('cD0yMDI2')
    expect(cursorOf(null)).toBeUndefined()
  })

  it('marks the name field on a 409 name_taken that names no field', async () => {
    stubApi({ 'POST /api/v1/ssh-keys/': () => problem(409, 'name_taken', 'An SSH key with this name exists.') })
    const error = await unwrap(api.POST('/api/v1/ssh-keys/', { body: { project: 'p', name: 'k', public_key: 'x' } })).catch((e) => e)
    expect(error.errors).toEqual({ name: ['An SSH key with this name exists.'] })
  })
})
