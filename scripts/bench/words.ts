/** Vocabulary for the bench's generated users, articles and comments: enough variety that rows differ in length. */

/** Accented letters only where they decompose, so that stripping the marks leaves a plain ASCII email. */
export const FIRST_NAMES = [
  'Aaliyah', 'Amélie', 'Anders', 'Beatriz', 'Björn', 'Camille', 'Chidi', 'Dmitri', 'Elena', 'Émile', 'Farah',
  'Gustavo', 'Hana', 'Ibrahim', 'Ingrid', 'Jae', 'Joaquín', 'Kamala', 'Lars', 'Léa', 'Malik', 'Mariana', 'Noah',
  'Nuño', 'Olufemi', 'Paula', 'Rafael', 'Renée', 'Sakura', 'Sofía', 'Tomás', 'Valentina', 'Wanjiru', 'Xavier',
  'Yusuf', 'Zoë',
];

export const LAST_NAMES = [
  'Abara', 'Becker', 'Castaño', 'Dahl', 'Eze', 'Fernández', 'Göransson', 'Horvath', 'Ishikawa', 'Jovanović',
  'Kowalski', 'Lindqvist', 'Mbeki', 'Müller', 'Nakashima', 'Öztürk', 'Pereira', 'Quispe', 'Rahman', 'Sánchez',
  'Tanaka', 'Uribe', 'Vásquez', 'Wójcik', 'Yilmaz', 'Zhou',
];

export const BIOS = [
  'Backend developer. Coffee, bikes and well-indexed tables.',
  'I write about the boring parts of software that keep everything running.',
  'Staff engineer, occasional speaker, full-time reader of stack traces.',
  'Frontend by day, compilers by night.',
  'Building developer tools. Opinions are my own and change often.',
  'Data engineer who still believes in SQL.',
  'Mentor, tinkerer, and recovering framework hopper.',
  'Site reliability, incident reviews and good dashboards.',
  'Learning in public. Mostly Rust and TypeScript these days.',
  'Product engineer who cares about latency budgets.',
];

/** Tag names: the hottest ranks get the plain words, the long tail gets numbered variants of them. */
export const TAG_WORDS = [
  'javascript', 'typescript', 'webdev', 'programming', 'react', 'node', 'python', 'devops', 'postgres', 'rust',
  'go', 'css', 'beginners', 'career', 'testing', 'security', 'performance', 'architecture', 'docker', 'kubernetes',
  'aws', 'linux', 'databases', 'api', 'design', 'productivity', 'opensource', 'tutorial', 'sqlite', 'graphql',
  'vue', 'svelte', 'java', 'kotlin', 'swift', 'android', 'ios', 'machinelearning', 'datascience', 'cloud',
  'serverless', 'microservices', 'git', 'accessibility', 'html', 'algorithms', 'debugging', 'observability',
  'frontend', 'backend',
];

export const TITLE_OPENERS = [
  'A practical guide to', 'What I learned shipping', 'Understanding', 'Debugging', 'Scaling', 'Testing',
  'The hidden cost of', 'Getting started with', 'Five mistakes teams make with', 'Rethinking', 'Lessons from a year of',
  'Why we moved away from', 'How we profiled', 'A field guide to',
];

export const TITLE_SUBJECTS = [
  'connection pools', 'error handling', 'schema migrations', 'caching layers', 'background jobs', 'feature flags',
  'rate limiting', 'pagination', 'observability', 'build pipelines', 'state management', 'access control',
  'search indexes', 'retries and timeouts', 'code review',
];

export const TITLE_CLOSERS = ['', '', ' in production', ' at scale', ' the hard way', ' for small teams', ': a case study', ' in 2025'];

export const DESCRIPTIONS = [
  'Notes from a migration that took longer than planned.',
  'What the profiler told us, and what it did not.',
  'A short tour of the trade-offs we made and why.',
  'The checklist we now run before every release.',
  'Numbers, graphs and a few surprises.',
  'A beginner-friendly walk through the essentials.',
  'Everything we wish we had known on day one.',
  'An honest look at what worked and what did not.',
  'Patterns that held up after two years in production.',
  'A small change with a surprisingly large effect.',
];

export const SENTENCES = [
  'We started by measuring the slowest requests instead of guessing where the time went.',
  'The first fix looked obvious, and it made things slightly worse.',
  'Most of the latency came from a single query that ran once per item in a list.',
  'Adding an index helped, but only after we changed the order of its columns.',
  'Nobody on the team had touched that part of the code in years.',
  'Our dashboards showed averages, which hid the requests that actually hurt users.',
  'The p99 told a very different story from the median.',
  'We wrote a small benchmark so that every change could be compared with the last one.',
  'Caching would have hidden the problem rather than solved it.',
  'It turned out the database was fine; the connection pool was far too small.',
  'Reading the query plan took ten minutes and saved us a week.',
  'We rolled the change out behind a flag and watched the error rate closely.',
  'Half of the work was deleting code that no longer did anything useful.',
  'A good test suite made the refactor boring, which is exactly what we wanted.',
  'The documentation was correct, but it described an older version.',
  'We argued about naming for longer than we spent on the actual fix.',
  'Load tests on a laptop are not production, but they are far better than nothing.',
  'Every retry doubled the pressure on a service that was already struggling.',
  'Timeouts everywhere turned a slow dependency into a fast failure.',
  'The simplest design survived; the clever one did not make it past review.',
  'We kept a log of every experiment, including the ones that failed.',
  'Memory usage crept up slowly until the container was killed at night.',
  'A single missing await explained three weeks of flaky tests.',
  'The migration ran in small batches so that the site stayed responsive.',
  'After the change, the hottest endpoint used a tenth of the CPU it used before.',
  'We now review query plans for every new list endpoint.',
  'Pagination by offset was fine until the tables grew past a million rows.',
  'The fix was four lines long; finding it took most of a sprint.',
  'Next, we want to make the same measurements part of continuous integration.',
  'If you try this yourself, start with the slowest page your users actually visit.',
];

export const COMMENTS = [
  'Great write-up, thank you for sharing the numbers.',
  'We ran into exactly the same issue last quarter.',
  'Did you try increasing the pool size before changing the queries?',
  'This is the clearest explanation of the trade-off I have read.',
  'How did you measure the p99 in production?',
  'Bookmarked, this will save us a lot of time.',
  'I would love a follow-up on the rollout itself.',
  'Interesting, our results were the opposite on PostgreSQL.',
  'The part about timeouts is so underrated.',
  'Could you share the benchmark script?',
  'Nice. We did something similar with feature flags.',
  'One small correction: the default changed in the latest release.',
];
