"""Reports: JUnit XML, JSON summary, HTML timelines and coverage."""
