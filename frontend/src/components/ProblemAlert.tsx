import { Alert, List } from '@mantine/core'
import { ApiError } from '../api/client'

/** The lead of a placement refusal whose reasons are listed (the detail's own list is the explanation's). */
const REASONS_LEAD: Record<string, string> = {
  unplaceable: 'No capacity of this fleet could ever hold it:',
  capacity_unavailable: 'No capacity can hold it now:',
}

/** A placement refusal's `reasons` (409 `capacity_unavailable`, 422 `unplaceable`): each a stable `code` and a
 * `message` for a person; [] for any other problem. */
export function problemReasons(problem: ApiError | null): { code: string; message: string }[] {
  const reasons = problem?.body.reasons
  return Array.isArray(reasons) ? reasons.filter((r) => r && typeof r.message === 'string') : []
}

/** The problem+json `detail` of a failed request (and its per-field messages not shown beside a field); a placement
 * refusal says why in its `reasons`' words instead of the detail. */
export function ProblemAlert({ error, title, shownFields = [], color = 'red' }: { error: unknown; title?: string; shownFields?: string[]; color?: string }) {
  if (!error) return null
  const problem = error instanceof ApiError ? error : null
  const reasons = problemReasons(problem)
  const lead = problem && reasons.length ? REASONS_LEAD[problem.code] : undefined
  const detail = lead ?? problem?.detail ?? (error instanceof Error ? error.message : String(error))
  const rest = problem ? Object.entries(problem.errors).filter(([field]) => !shownFields.includes(field)) : []
  return (
    <Alert color={color} title={title ?? 'The request failed'} role="alert" data-testid="problem">
      {detail}
      {lead && (
        <List size="sm" mt="xs" data-testid="problem-reasons">
          {reasons.map((r, i) => <List.Item key={i}>{r.message}</List.Item>)}
        </List>
      )}
      {rest.length > 0 && (
        <List size="sm" mt="xs">
          {rest.map(([field, messages]) => (
            <List.Item key={field}>
              {field}: {messages.join(' ')}
            </List.Item>
          ))}
        </List>
      )}
    </Alert>
  )
}

/** The first message the API gave for `field` (in `errors`), for a form field's `error` prop. */
export function fieldError(error: unknown, field: string): string | undefined {
  if (!(error instanceof ApiError)) return undefined
  const messages = error.errors[field]
  return messages && messages.length ? messages.join(' ') : undefined
}
