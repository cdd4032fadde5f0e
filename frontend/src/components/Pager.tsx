import { Button, Group, Text } from '@mantine/core'

export function Pager({ pageNumber, hasNext, hasPrevious, onNext, onPrevious, loading }: {
  pageNumber: number
  hasNext: boolean
  hasPrevious: boolean
  onNext: () => void
  onPrevious: () => void
  loading?: boolean
}) {
  if (!hasNext && !hasPrevious) return null
  return (
    <Group justify="flex-end" mt="sm" aria-label="Pages" role="navigation">
      <Button variant="default" size="xs" onClick={onPrevious} disabled={!hasPrevious || loading}>
        Previous
      </Button>
      <Text size="sm" aria-live="polite">
        Page {pageNumber}
      </Text>
      <Button variant="default" size="xs" onClick={onNext} disabled={!hasNext || loading}>
        Next
      </Button>
    </Group>
  )
}
