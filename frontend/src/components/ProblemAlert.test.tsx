import { MantineProvider } from '@mantine/core'
import { render, screen } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import { ApiError } from '../api/client'
import { theme } from '../theme'
import { ProblemAlert } from './ProblemAlert'

const show = (error: unknown) => render(<MantineProvider theme={theme}><ProblemAlert error={error} title="The lease was not created" /></MantineProvider>)

describe('ProblemAlert', () => {
  it('says why a placement was refused in the reasons’ words, not the explanation’s filter names', () => {
    show(new ApiError(409, {
      code: 'capacity_unavailable', status: 409,
      detail: 'No capacity can hold the request now: 82 hosts considered; gpu_model removed 74, gpu_capacity removed 8',
      reasons: [
        { code: 'gpu_model', hosts: 74, message: '74 hosts have a different GPU model' },
        { code: 'gpu_capacity', hosts: 8, message: '8 hosts have too few free GPUs' },
      ],
    }))
    const alert = screen.getByTestId('problem')
    expect(alert).toHaveTextContent('No capacity can hold it now:')
    expect(Array.from(screen.getByTestId('problem-reasons').querySelectorAll('li')).map((li) => li.textContent)).toEqual([
      '74 hosts have a different GPU model', '8 hosts have too few free GPUs',
    ])
    expect(alert).not.toHaveTextContent(/removed|gpu_model/)
  })

  it('shows the detail of any other problem', () => {
    show(new ApiError(409, { code: 'name_taken', status: 409, detail: 'The name is used in this project.' }))
    expect(screen.getByTestId('problem')).toHaveTextContent('The name is used in this project.')
    expect(screen.queryByTestId('problem-reasons')).toBeNull()
  })
})
