import { describeGraphQLFailureCases } from '../adapters/graphql-cases'
import { yogaHost } from './fixtures'

// Masking, the failure policy and @defer: the cases Yoga and Apollo Server share.
describeGraphQLFailureCases(yogaHost)
