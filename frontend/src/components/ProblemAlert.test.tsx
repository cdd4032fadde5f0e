import { screen } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import { ApiError } from '../api/client'
import { renderPage } from '../test/render'
import { ProblemAlert } from './ProblemAlert'

const refusal = (status: number, errors: Record<string, string[]> = {}) =>
  new ApiError(status, { detail: 'The detail.', code: 'c', errors })

describe('ProblemAlert', () => {
  it.each([
    [400, 'Some of what was entered cannot be used'],
    [403, 'Your role does not allow this'],
    [409, 'Not possible in the current state'],
    [429, 'Too many requests: wait a moment, then try again'],
    [503, 'The service failed: try again later'],
  ])('heads a %i refusal with what kind of refusal it is', (status, heading) => {
    renderPage(<ProblemAlert error={refusal(status)} />)
    expect(screen.getByRole('alert')).toHaveTextContent(heading)
    expect(screen.getByRole('alert')).toHaveTextContent('The detail.')
  })

  it('names a field not shown beside an input in words, not by its API name', () => {
    renderPage(<ProblemAlert error={refusal(400, { security_group_ids: ['Not found.'] })} />)
    expect(screen.getByRole('alert')).toHaveTextContent('Security group ids: Not found.')
    expect(screen.getByRole('alert')).not.toHaveTextContent('security_group_ids')
  })

  it('says the service could not be reached when no answer came', () => {
    renderPage(<ProblemAlert error={new TypeError('Failed to fetch')} />)
    expect(screen.getByRole('alert')).toHaveTextContent('The service could not be reached')
  })

  it('shows the request id of a 5xx problem, to quote to support', () => {
    const failure = new ApiError(500, { detail: 'An unexpected error occurred. Quote the request_id to support.',
      code: 'internal_error', request_id: '0193a7c2-1f00-7abc-8def-0123456789ab' })
    renderPage(<ProblemAlert error={failure} />)
    expect(screen.getByTestId('problem-request-id')).toHaveTextContent('Request id: 0193a7c2-1f00-7abc-8def-0123456789ab')
  })

  it('takes the X-Request-ID header when the 5xx body carries no request_id (a proxy\'s page)', () => {
    renderPage(<ProblemAlert error={new ApiError(502, {}, 'req-from-header')} />)
    expect(screen.getByTestId('problem-request-id')).toHaveTextContent('Request id: req-from-header')
  })

  it('shows no request id for a refusal the person can fix', () => {
    renderPage(<ProblemAlert error={new ApiError(400, { detail: 'Bad.', code: 'c', request_id: 'r-1' })} />)
    expect(screen.queryByTestId('problem-request-id')).toBeNull()
  })
})
