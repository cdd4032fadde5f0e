import { Button } from '@mantine/core'
import { Link } from 'react-router'
import { EmptyState } from '../components/EmptyState'

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
      This {what} does not exist, or it belongs to a project you are not a member of.
    </EmptyState>
  )
}
