import { Alert, List } from '@mantine/core'
import { ApiError } from '../api/client'

/** The problem+json `detail` of a failed request (and its per-field messages not shown beside a field). */
export function ProblemAlert({ error, title, shownFields = [], color = 'red' }: { error: unknown; title?: string; shownFields?: string[]; color?: string }) {
  if (!error) return null
  const problem = error instanceof ApiError ? error : null
  const detail = problem?.detail ?? (error instanceof Error ? error.message : String(error))
  const rest = problem ? Object.entries(problem.errors).filter(([field]) => !shownFields.includes(field)) : []
  return (
    <Alert color={color} title={title ?? 'The request failed'} role="alert" data-testid="problem">
      {detail}
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
