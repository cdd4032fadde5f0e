import { Button } from '@mantine/core'
import { Link } from 'react-router'
import { EmptyState } from '../components/EmptyState'

/** A page, or an object, that is not there for this account: missing, mistyped, or another organization's or
 * project's (the API answers those alike, so the page does too). */
export function NotFoundPage({ what = 'page' }: { what?: string }) {
  return (
    <EmptyState
      title="Not found"
      action={
        <Button component={Link} to="/">
          Go to the dashboard
        </Button>
      }
    >
      This {what} does not exist, or your account may not see it. Check the address, or choose the organization and
      project it belongs to in the header.
    </EmptyState>
  )
}
